// The grader (src/eval: extract, normalize, math_expr, math_equal) against a
// table of (model output, reference, verdict) cases written by hand from the
// answer styles of MATH-500, GSM8K and AIME, plus hostile inputs that must
// give a verdict without crashing, and the real MATH-500 file: every
// reference equals itself boxed, and the answer field agrees with the last
// \boxed of the solution.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/extract.h"
#include "eval/math_equal.h"
#include "eval/math_expr.h"
#include "eval/normalize.h"

namespace skipkv::eval {
namespace {

struct Case {
  const char* output;     // what the model wrote (or just the answer)
  const char* reference;  // the dataset's answer
  bool equal;
};

// Boxed answers in the MATH-500 styles.
const Case kBoxed[] = {
    // integers, signs, thousands separators
    {"so the answer is \\boxed{46}.", "46", true},
    {"\\boxed{45}", "46", false},
    {"\\boxed{-9}", "-9", true},
    {"\\boxed{9}", "-9", false},
    {"\\boxed{10,080}", "10,\\!080", true},
    {"\\boxed{10080}", "10,\\!080", true},
    {"\\boxed{11111111100}", "11,\\! 111,\\! 111,\\! 100", true},
    {"\\boxed{58500}", "58,500", true},
    {"\\boxed{58,600}", "58,500", false},
    {"\\boxed{58,501}", "58,500", true},  // R-KV's isclose(rel_tol=1e-4)
    {"\\boxed{0}", "0", true},
    {"\\boxed{00}", "0", true},
    {"\\boxed{1736.0}", "1736", true},
    {"\\boxed{1736.5}", "1736", false},
    // decimals and leading points
    {"\\boxed{0.35625}", ".35625", true},
    {"\\boxed{.35625}", ".35625", true},
    {"\\boxed{0.3562}", ".35625", false},
    {"\\boxed{6.72\\times 10^{-5}}", ".0000672", true},
    {"\\boxed{0.0000672}", ".0000672", true},
    {"\\boxed{3.21}", "3.21", true},
    {"\\boxed{3.2}", "3.21", false},
    {"\\boxed{4.5}", "4.5", true},
    {"\\boxed{\\frac{9}{2}}", "4.5", true},
    {"\\boxed{326.5}", "326.5", true},
    // fractions
    {"\\boxed{\\frac{1}{8}}", "\\frac{1}{8}", true},
    {"\\boxed{\\dfrac{1}{8}}", "\\frac{1}{8}", true},
    {"\\boxed{\\tfrac18}", "\\frac{1}{8}", true},
    {"\\boxed{1/8}", "\\frac{1}{8}", true},
    {"\\boxed{0.125}", "\\frac{1}{8}", true},
    {"\\boxed{\\frac{2}{16}}", "\\frac{1}{8}", true},
    {"\\boxed{\\frac{1}{9}}", "\\frac{1}{8}", false},
    {"\\boxed{\\frac{17}{50}}", "\\dfrac{17}{50}", true},
    {"\\boxed{0.34}", "\\dfrac{17}{50}", true},
    {"\\boxed{\\frac59}", "\\frac 59", true},
    {"\\boxed{\\frac{5}{9}}", "\\frac 59", true},
    {"\\boxed{\\frac{9}{5}}", "\\frac 59", false},
    {"\\boxed{\\frac{4}{3}}", "\\frac43", true},
    {"\\boxed{\\frac{6}{5}}", "\\frac65", true},
    {"\\boxed{\\frac{9}{19}}", "\\frac9{19}", true},
    {"\\boxed{-\\frac{35}{9}}", "-\\frac{35}{9}", true},
    {"\\boxed{\\frac{-35}{9}}", "-\\frac{35}{9}", true},
    {"\\boxed{\\frac{35}{9}}", "-\\frac{35}{9}", false},
    {"\\boxed{\\frac{639}{40}}", "\\frac{639}{40}", true},
    {"\\boxed{15.975}", "\\frac{639}{40}", true},
    {"\\boxed{\\frac{3}{56}}", "\\frac{3}{56}", true},
    {"\\boxed{-\\frac{24}{25}}", "-\\frac{24}{25}", true},
    {"\\boxed{-0.96}", "-\\frac{24}{25}", true},
    {"\\boxed{\\frac{12}{3}}", "\\frac{1}{23}", false},
    // mixed numbers
    {"\\boxed{137.5}", "137 \\frac{1}{2}", true},
    {"\\boxed{\\frac{275}{2}}", "137 \\frac{1}{2}", true},
    {"\\boxed{1\\frac{4}{5}}", "1\\frac{4}{5}", true},
    {"\\boxed{\\frac{9}{5}}", "1\\frac{4}{5}", true},
    {"\\boxed{\\frac{4}{5}}", "1\\frac{4}{5}", false},
    // radicals
    {"\\boxed{\\sqrt{51}}", "\\sqrt{51}", true},
    {"\\boxed{\\sqrt{50}}", "\\sqrt{51}", false},
    {"\\boxed{3\\sqrt{13}}", "3\\sqrt{13}", true},
    {"\\boxed{\\sqrt{117}}", "3\\sqrt{13}", true},
    {"\\boxed{11\\sqrt{2}}", "11\\sqrt2", true},
    {"\\boxed{\\sqrt{242}}", "11\\sqrt2", true},
    {"\\boxed{70\\sqrt{2}}", "70 \\sqrt{2}", true},
    {"\\boxed{2 \\sqrt{113}}", "2\\sqrt{113}", true},
    {"\\boxed{\\frac{\\sqrt{3}}{3}}", "\\frac{\\sqrt{3}}{3}", true},
    {"\\boxed{\\frac{1}{\\sqrt{3}}}", "\\frac{\\sqrt{3}}{3}", true},
    {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{3}}{3}", false},
    {"\\boxed{\\frac{3\\sqrt{3}}{4}}", "\\frac{3\\sqrt{3}}{4}", true},
    {"\\boxed{\\frac{\\sqrt{21}}{5}}", "\\frac{\\sqrt{21}}{5}", true},
    {"\\boxed{-\\sqrt{3}}", "-\\sqrt{3}", true},
    {"\\boxed{\\sqrt{3}}", "-\\sqrt{3}", false},
    {"\\boxed{1+2\\sqrt{3}}", "1+2\\sqrt{3}", true},
    {"\\boxed{2\\sqrt{3}+1}", "1+2\\sqrt{3}", true},
    {"\\boxed{11\\sqrt{5}+11}", "11 \\sqrt{5} + 11", true},
    {"\\boxed{\\sqrt[3]{8}}", "2", true},
    {"\\boxed{16\\sqrt{3}}", "16 \\sqrt{3}", true},
    {"\\boxed{27.7128}", "16 \\sqrt{3}", true},
    {"\\boxed{27.8}", "16 \\sqrt{3}", false},
    // pi
    {"\\boxed{\\pi}", "\\pi", true},
    {"\\boxed{3.14159}", "\\pi", true},
    {"\\boxed{3.14}", "\\pi", false},
    {"\\boxed{288\\pi}", "288 \\pi", true},
    {"\\boxed{288 \\pi}", "288 \\pi", true},
    {"\\boxed{12\\pi}", "12\\pi", true},
    {"\\boxed{18+2\\pi}", "18+2\\pi", true},
    {"\\boxed{2\\pi+18}", "18+2\\pi", true},
    {"\\boxed{-\\frac{\\pi}{6}}", "-\\frac{\\pi}{6}", true},
    {"\\boxed{\\frac{-\\pi}{6}}", "-\\frac{\\pi}{6}", true},
    {"\\boxed{\\frac{\\pi}{6}}", "-\\frac{\\pi}{6}", false},
    {"\\boxed{\\frac{20000}{\\pi}}", "\\frac{20000}{\\pi}", true},
    // degrees and units
    {"\\boxed{90^\\circ}", "90^\\circ", true},
    {"\\boxed{90}", "90^\\circ", true},
    {"\\boxed{90^{\\circ}}", "90^\\circ", true},
    {"\\boxed{90 \\text{ degrees}}", "90^\\circ", true},
    {"\\boxed{91}", "90^\\circ", false},
    {"\\boxed{\\frac{270}{7}}", "\\frac{270}7\\text{ degrees}", true},
    {"\\boxed{5.4}", "5.4 \\text{ cents}", true},
    {"\\boxed{5.4 \\text{ cents}}", "5.4 \\text{ cents}", true},
    {"\\boxed{864}", "864 \\mbox{ inches}^2", true},
    {"\\boxed{15}", "15\\mbox{ cm}^2", true},
    {"\\boxed{32348}", "\\$32,\\!348", true},
    {"\\boxed{\\$32,348}", "\\$32,\\!348", true},
    {"\\boxed{18.90}", "\\$18.90", true},
    {"\\boxed{\\$18.9}", "\\$18.90", true},
    {"\\boxed{36 \\text{ dollars}}", "\\$36", true},
    {"\\boxed{50\\%}", "50", true},
    {"\\boxed{0.5}", "50", true},
    {"\\boxed{5}", "50", false},
    // expressions with variables
    {"\\boxed{x^5 - x^4 + x^3 - x^2 + x - 1}", "x^5 - x^4 + x^3 - x^2 + x - 1", true},
    {"\\boxed{-1 + x - x^2 + x^3 - x^4 + x^5}", "x^5 - x^4 + x^3 - x^2 + x - 1", true},
    {"\\boxed{x^5 - x^4 + x^3 - x^2 + x + 1}", "x^5 - x^4 + x^3 - x^2 + x - 1", false},
    {"\\boxed{(x+1)^2}", "x^2+2x+1", true},
    {"\\boxed{(x-1)^2}", "x^2+2x+1", false},
    {"\\boxed{x^3+3x-6}", "x^3+3x-6", true},
    {"\\boxed{3x-6+x^3}", "x^3+3x-6", true},
    {"\\boxed{p - q}", "p - q", true},
    {"\\boxed{-q+p}", "p - q", true},
    {"\\boxed{q - p}", "p - q", false},
    {"\\boxed{2k+2}", "2k+2", true},
    {"\\boxed{2(k+1)}", "2k+2", true},
    {"\\boxed{ab+2a+5b+10}", "(a+5)(b+2)", true},
    {"\\boxed{(b+2)(a+5)}", "(a+5)(b+2)", true},
    {"\\boxed{(a+2)(b+5)}", "(a+5)(b+2)", false},
    {"\\boxed{-13x+3}", "-13x+3", true},
    {"\\boxed{3-13x}", "-13x+3", true},
    {"\\boxed{6r^2-4r-24}", "6r^2-4r-24", true},
    {"\\boxed{2(3r^2-2r-12)}", "6r^2-4r-24", true},
    {"\\boxed{\\frac{11+9a}{20}}", "\\frac{11+9a}{20}", true},
    {"\\boxed{\\frac{9a+11}{20}}", "\\frac{11+9a}{20}", true},
    {"\\boxed{\\frac{11+9a}{21}}", "\\frac{11+9a}{20}", false},
    {"\\boxed{5r^5}", "5r^5", true},
    {"\\boxed{3R^2}", "3R^2", true},
    {"\\boxed{8n^2+4n+1}", "8n^2 + 4n + 1", true},
    {"\\boxed{\\cot x}", "\\cot x", true},
    {"\\boxed{\\frac{\\cos x}{\\sin x}}", "\\cot x", true},
    {"\\boxed{\\tan x}", "\\cot x", false},
    {"\\boxed{15x - 80}", "15x - 80", true},
    {"\\boxed{x^8+x^7+x^6+x^5+x^4+x^3+x^2+x+1}", "x^8 + x^7 + x^6 + x^5 + x^4 + x^3 + x^2 + x + 1", true},
    {"\\boxed{\\frac{x^9-1}{x-1}}", "x^8 + x^7 + x^6 + x^5 + x^4 + x^3 + x^2 + x + 1", true},
    // complex numbers
    {"\\boxed{6-5i}", "6 - 5i", true},
    {"\\boxed{-5i+6}", "6 - 5i", true},
    {"\\boxed{6+5i}", "6 - 5i", false},
    {"\\boxed{1+274i}", "1+274i", true},
    {"\\boxed{(1+2i)}", "1+2i", true},
    {"\\boxed{-2+7i}", "-2 + 7i", true},
    // equations
    {"\\boxed{x=5}", "x=5", true},
    {"\\boxed{5}", "x=5", true},
    {"\\boxed{x = 6}", "x=5", false},
    {"\\boxed{y=2x+3}", "y = 2x + 3", true},
    {"\\boxed{y = 3 + 2x}", "y = 2x + 3", true},
    {"\\boxed{y=2x-3}", "y = 2x + 3", false},
    {"\\boxed{y=-2x}", "y = -2x", true},
    {"\\boxed{5x-7y+11z+4=0}", "5x - 7y + 11z + 4 = 0", true},
    {"\\boxed{-5x+7y-11z-4=0}", "5x - 7y + 11z + 4 = 0", true},
    {"\\boxed{5x-7y+11z-4=0}", "5x - 7y + 11z + 4 = 0", false},
    {"\\boxed{k = 3}", "3", true},
    // tuples, intervals, unions, sets, lists
    {"\\boxed{(3, \\frac{\\pi}{2})}", "\\left( 3, \\frac{\\pi}{2} \\right)", true},
    {"\\boxed{\\left(3,\\frac{\\pi}{2}\\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)", true},
    {"\\boxed{(3, \\pi)}", "\\left( 3, \\frac{\\pi}{2} \\right)", false},
    {"\\boxed{(6,31,-1)}", "(6,31,-1)", true},
    {"\\boxed{(6, 31, -1)}", "(6,31,-1)", true},
    {"\\boxed{(6,-1,31)}", "(6,31,-1)", false},
    {"\\boxed{(1,-16,-4,43)}", "(1,-16,-4,43)", true},
    {"\\boxed{(-2,1)}", "(-2,1)", true},
    {"\\boxed{(15,-29)}", "(15,-29)", true},
    {"\\boxed{(\\frac{3}{2},-13)}", "\\left( \\frac{3}{2}, -13 \\right)", true},
    {"\\boxed{(1.5,-13)}", "\\left( \\frac{3}{2}, -13 \\right)", true},
    {"\\boxed{(3,4]}", "(3,4]", true},
    {"\\boxed{(3,4)}", "(3,4]", false},
    {"\\boxed{[3,4]}", "(3,4]", false},
    {"\\boxed{(2,\\infty)}", "(2,\\infty)", true},
    {"\\boxed{[2,\\infty)}", "(2,\\infty)", false},
    {"\\boxed{(-\\infty,0]}", "(-\\infty, 0]", true},
    {"\\boxed{(0,9) \\cup (9,36)}", "(0,9) \\cup (9,36)", true},
    {"\\boxed{(0,9)\\cup(9,37)}", "(0,9) \\cup (9,36)", false},
    {"\\boxed{(-\\infty,2)\\cup(3,\\infty)}", "(-\\infty, 2) \\cup (3, \\infty)", true},
    {"\\boxed{(\\frac{3}{5},\\frac{8}{3}]}", "\\left(\\frac{3}{5},\\frac{8}{3}\\right]", true},
    {"\\boxed{[\\frac{\\pi^2}{8},\\frac{5\\pi^2}{4}]}",
     "\\left[ \\frac{\\pi^2}{8}, \\frac{5 \\pi^2}{4} \\right]", true},
    {"\\boxed{[-2,7]}", "x \\in [-2,7]", true},
    {"\\boxed{1,-2}", "1,-2", true},
    {"\\boxed{-2,1}", "1,-2", true},
    {"\\boxed{-2, 1}", "-2,1", true},
    {"\\boxed{1,2}", "1,-2", false},
    {"\\boxed{3,5,7}", "3, 5, 7", true},
    {"\\boxed{7, 5, 3}", "3, 5, 7", true},
    {"\\boxed{3,5}", "3, 5, 7", false},
    {"\\boxed{\\{1\\pm\\sqrt{5},-2\\}}", "\\{1\\pm\\sqrt{5},-2\\}", true},
    {"\\boxed{3+2\\sqrt{2}, 3-2\\sqrt{2}}", "3 \\pm 2 \\sqrt{2}", true},
    {"\\boxed{3 \\pm 2\\sqrt{2}}", "3 \\pm 2 \\sqrt{2}", true},
    {"\\boxed{1+\\sqrt{19},1-\\sqrt{19}}", "1 \\pm \\sqrt{19}", true},
    {"\\boxed{1+\\sqrt{19}}", "1 \\pm \\sqrt{19}", false},
    // matrices and vectors
    {"\\boxed{\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}}",
     "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", true},
    {"\\boxed{\\begin{pmatrix} -\\frac{1}{3} \\\\ \\frac{2}{3} \\\\ \\frac{5}{3} \\end{pmatrix}}",
     "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", true},
    {"\\boxed{\\begin{pmatrix} 1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}}",
     "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", false},
    {"\\boxed{\\begin{bmatrix} -1 & 0 \\\\ 0 & -1 \\end{bmatrix}}",
     "\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", true},
    {"\\boxed{\\begin{pmatrix} -1 & 0 \\\\ 0 & 1 \\end{pmatrix}}",
     "\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", false},
    {"\\boxed{\\begin{pmatrix} -2 \\\\ -14 \\\\ -7 \\end{pmatrix}}",
     "\\begin{pmatrix} -2 \\\\ -14 \\\\ -7 \\end{pmatrix}", true},
    // text answers, multiple choice, bases
    {"\\boxed{\\text{Evelyn}}", "\\text{Evelyn}", true},
    {"\\boxed{Evelyn}", "\\text{Evelyn}", true},
    {"\\boxed{\\text{Navin}}", "\\text{Evelyn}", false},
    {"\\boxed{\\text{east}}", "\\text{east}", true},
    {"\\boxed{\\text{west}}", "\\text{east}", false},
    {"\\boxed{\\text{even}}", "\\text{even}", true},
    {"\\boxed{\\text{odd}}", "\\text{even}", false},
    {"\\boxed{\\text{ellipse}}", "\\text{ellipse}", true},
    {"\\boxed{\\text{(C)}}", "\\text{(C)}", true},
    {"\\boxed{C}", "\\text{(C)}", true},
    {"\\boxed{(C)}", "\\text{(C)}", true},
    {"\\boxed{B}", "\\text{(C)}", false},
    {"\\boxed{52_8}", "52_8", true},
    {"\\boxed{52}", "52_8", false},
    {"\\boxed{4210_5}", "4210_{5}", false},  // R-KV keeps the braces of a subscript
    {"\\boxed{4210_{5}}", "4210_{5}", true},
    {"\\boxed{2516_8}", "2516_8", true},
};

// Extraction paths other than \boxed (GSM8K and free-form outputs).
const Case kFreeForm[] = {
    {"Janet sells 9 eggs at $2 each, so she makes 9*2 = 18 dollars.\n#### 18", "#### 18", true},
    {"#### 18", "She makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18", true},
    {"#### 1,080", "#### 1080", true},
    {"The answer is 72.", "72", true},
    {"So the final answer is 72.", "72", true},
    {"The answer is: 72", "72", true},
    {"The answer is 71.", "72", false},
    {"First 3 then 5, finally we get 42", "42", true},
    {"First 3 then 5, finally we get 42 apples", "42", true},
    {"we computed 1,234,567 total", "1234567", true},
    {"the value is -3.5 here", "-3.5", true},
    {"The final answer is $\\frac{1}{2}$. I hope it is correct.", "\\frac12", true},
    {"The final answer is $\\frac{1}{3}$. I hope it is correct.", "\\frac12", false},
    {"Final answer: \\fbox{7}", "7", true},
    {"We get \\boxed{3} first, then correct it: \\boxed{5}", "5", true},
    {"We get \\boxed{5} first, then correct it: \\boxed{3}", "5", false},
    {"\\boxed{\\frac{1}{2}}</s>junk \\boxed{7}", "\\frac{1}{2}", true},
    {"\\boxed{7}<|im_end|>\\boxed{8}", "7", true},
    {"the result is $\\boxed 7$ done", "7", true},
    {"no digits at all here", "7", false},
    {"", "7", false},
    {"\\boxed{}", "7", false},
    {"Answer: \\boxed{\n 12 \n}", "12", true},
    {"\\boxed{12}.", "\\boxed{12}", true},
    {"\\boxed{\\frac{\\sqrt{3}}{2}}", "so $\\sin 60^\\circ = \\boxed{\\frac{\\sqrt{3}}{2}}$.", true},
    {"\\boxed{five}", "5", true},
    {"\\boxed{twenty-one}", "21", true},
};

void RunTable(const Case* cases, size_t n, const char* name) {
  for (size_t i = 0; i < n; ++i) {
    const Grade g = GradeOutput(cases[i].output, cases[i].reference);
    EXPECT_EQ(g.equal, cases[i].equal)
        << name << "[" << i << "]: output \"" << cases[i].output << "\" reference \"" << cases[i].reference
        << "\" extracted \"" << g.extracted << "\" normalised reference \"" << g.reference << "\"";
  }
}

TEST(EvalGraderTest, BoxedMath500Styles) {
  static_assert(std::size(kBoxed) >= 150);
  RunTable(kBoxed, std::size(kBoxed), "boxed");
}

TEST(EvalGraderTest, FreeFormAndGsm8kExtraction) { RunTable(kFreeForm, std::size(kFreeForm), "free"); }

TEST(EvalGraderTest, ExtractionDetails) {
  EXPECT_EQ(LastBoxed("a \\boxed{x{y}z} b"), "x{y}z");
  EXPECT_EQ(LastBoxed("\\boxed{unclosed {deep"), "unclosed {deep");
  EXPECT_EQ(LastBoxed("nothing here"), std::nullopt);
  EXPECT_EQ(ExtractRawAnswer("he answer is 5 and the answer is 6"), "6");
  EXPECT_EQ(ExtractRawAnswer("x = 1.5, y = -.25."), "-.25");
  EXPECT_EQ(ExtractRawAnswer("1.2.3"), ".3");
  EXPECT_EQ(TruncateOutput("abc<|endoftext|>def"), "abc");
  EXPECT_EQ(ExtractAnswer(": 12."), "12");
}

TEST(EvalGraderTest, StripStringRules) {
  EXPECT_EQ(StripString("\\dfrac{1}{2}"), "\\frac{1}{2}");
  EXPECT_EQ(StripString("\\frac12"), "\\frac{1}{2}");
  EXPECT_EQ(StripString("\\frac1{b}"), "\\frac{1}{b}");
  EXPECT_EQ(StripString("3/4"), "\\frac{3}{4}");
  EXPECT_EQ(StripString("03/4"), "03/4");
  EXPECT_EQ(StripString("\\sqrt2"), "\\sqrt{2}");
  EXPECT_EQ(StripString("12.00"), "12");
  EXPECT_EQ(StripString("12.50"), "12.50");
  EXPECT_EQ(StripString(".5"), "0.5");
  EXPECT_EQ(StripString("x \\in [1, 2]"), "[1,2]");
  EXPECT_EQ(StripString("10 \\text{ cm}"), "10");
  EXPECT_EQ(StripString("5 inches"), "5");
  EXPECT_EQ(StripString("\\left( 1, 2 \\right)"), "(1,2)");
  EXPECT_EQ(StripString("50\\%"), "50");
  EXPECT_EQ(StripString("\\emptyset"), "{}");
  EXPECT_EQ(StripString("k = 7"), "7");
  EXPECT_EQ(StripString("3 + 4j"), "3+4i");
  EXPECT_EQ(StripString("\\text{(A)}"), "A");
  EXPECT_EQ(StripString("\\$5"), "5");
  EXPECT_EQ(StripString("1 \\le x"), "1\\lex");
}

TEST(EvalGraderTest, ExpressionParser) {
  auto e = MathExpr::Parse("x^2+2x+1");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->variables(), std::vector<std::string>{"x"});
  EXPECT_NEAR(e->Eval({{3.0, 0.0}}).real(), 16.0, 1e-12);
  auto f = MathExpr::Parse("\\frac{\\sqrt{3}}{2}+2^{10}-3!");
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->Eval({}).real(), std::sqrt(3.0) / 2 + 1024 - 6, 1e-9);
  EXPECT_FALSE(MathExpr::Parse("52_8").has_value());
  EXPECT_FALSE(MathExpr::Parse("\\infty").has_value());
  EXPECT_FALSE(MathExpr::Parse("(1,2)").has_value());
  EXPECT_FALSE(MathExpr::Parse("2+").has_value());
  EXPECT_FALSE(MathExpr::Parse("").has_value());
  EXPECT_TRUE(SymbolicEqual("\\sin^2x+\\cos^2x", "1"));
  EXPECT_TRUE(SymbolicEqual("e^{i\\pi}", "-1"));
  EXPECT_FALSE(SymbolicEqual("x", "y"));
  EXPECT_FALSE(SymbolicEqual("\\frac{1}{0}", "\\frac{1}{0}"));  // never a finite point
}

// Hostile inputs: never a crash, always a verdict, in bounded time.
TEST(EvalGraderTest, HostileInputs) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> inputs = {
      std::string(100000, '{'),
      std::string(100000, '}'),
      "\\boxed{" + std::string(100000, '{'),
      "\\boxed{" + std::string(50000, '{') + "1" + std::string(50000, '}') + "}",
      "\\boxed{" + std::string(100000, '(') + "}",
      "\\boxed{" + std::string(20000, '(') + "1" + std::string(20000, ')') + "}",
      "\\boxed{" + std::string(1000, '-') + "1}",
      "\\boxed{2" + std::string(5000, '^') + "}",
      "\\boxed{" + std::string(100000, 'x') + "}",
      std::string(100000, '9'),
      "The answer is " + std::string(100000, 'a'),
      "\\boxed{" +
          [] {
            std::string s;
            for (int i = 0; i < 5000; ++i) s += "1,";
            return s;
          }() +
          "}",
      "\\boxed{\\frac{\\frac{\\frac{\\frac{1}{2}}{3}}{4}}{5}}",
      "\\boxed{\\sqrt{\\sqrt{\\sqrt{\\sqrt{\\sqrt{\\sqrt{\\sqrt{\\sqrt{2}}}}}}}}}",
      "\\boxed{\\frac}",
      "\\boxed{\\sqrt}",
      "\\boxed{\\sqrt[}",
      "\\boxed{\\begin{pmatrix}\\end{pmatrix}}",
      "\\boxed{\\\\\\\\&&&}",
      "\\boxed{=}",
      "\\boxed{==}",
      "\\boxed{\\pm}",
      "\\boxed{)(}",
      "\\boxed{]}",
      "\\boxed{\xff\xfe\x80}",
      std::string("\\boxed{1\0 2}", 12),
      "boxed",
      "\\fbox",
      "####",
      "he answer is",
  };
  std::string nested;
  for (int i = 0; i < 3000; ++i) nested += "\\frac{";
  inputs.push_back("\\boxed{" + nested + "}");
  for (const std::string& in : inputs) {
    for (const char* ref :
         {"7", "(1,2)", "x^2", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", "1 \\pm \\sqrt{2}", ""}) {
      const Grade g = GradeOutput(in, ref);
      (void)g;
      const Grade rev = GradeOutput("\\boxed{" + std::string(ref) + "}", in);
      (void)rev;
    }
  }
  // A nested-parenthesis answer equals its own value.
  EXPECT_TRUE(GradeOutput("\\boxed{((((((1))))))}", "1").equal);
  EXPECT_FALSE(GradeOutput(std::string(100000, '{'), "7").equal);
  EXPECT_FALSE(GradeOutput("\\boxed{" + std::string(100000, 'x') + "}", "7").equal);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 30.0);
}

std::vector<nlohmann::json> ReadJsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// The real MATH-500 references: each equals itself written in a box, and the
// `answer` field agrees with the last \boxed of the `solution` (the reference
// R-KV grades against).
TEST(EvalGraderTest, Math500ReferencesAgree) {
  const auto rows = ReadJsonl(std::string(SKIPKV_DATA_DIR) + "/datasets/math500_test.jsonl");
  ASSERT_EQ(rows.size(), 500u);
  int self_equal = 0, solution_agrees = 0;
  for (const auto& r : rows) {
    const std::string answer = r.at("answer").get<std::string>();
    const std::string solution = r.at("solution").get<std::string>();
    if (GradeOutput("Therefore \\boxed{" + answer + "}.", answer).equal) {
      ++self_equal;
    } else {
      ADD_FAILURE() << "answer not equal to itself: " << answer;
    }
    if (MathEqual(NormalizeReference(answer), NormalizeReference(solution))) {
      ++solution_agrees;
    } else {
      ADD_FAILURE() << "answer " << answer << " vs solution box " << NormalizeReference(solution);
    }
  }
  EXPECT_EQ(self_equal, 500);
  EXPECT_EQ(solution_agrees, 500);
}

}  // namespace
}  // namespace skipkv::eval
