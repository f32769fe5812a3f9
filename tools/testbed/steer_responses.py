"""Turns `skipkv eval` rows of the testbed into the --responses file of `skipkv steer-extract` (issue 13
item 4), so that the testbed's steering vector is extracted from the model's own traces.

steer-extract's stage 1 asks SEAL's instruction in a chat template, which the testbed has none of; its
stage 2 reads ready responses instead. Each output line holds the problem's prompt ids, the response's ids
(both from bpe.py, which encodes exactly like the engine: check_tokenizer.py) and the grader's verdict.

  /usr/bin/python3 tools/testbed/steer_responses.py --dataset val.jsonl --rows eval.jsonl --out responses.jsonl
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bpe import Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True, help="the eval dataset (gen.py --format eval)")
    ap.add_argument("--rows", required=True, help="skipkv eval's results JSONL")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer.json"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tok = Tokenizer(a.tokenizer)
    prompts = {}  # by line number (1-based), as eval rows name their problem's line
    with open(a.dataset) as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                prompts[line_no] = json.loads(line)["prompt"]
    n = {True: 0, False: 0}
    with open(a.rows) as f, open(a.out, "w") as out:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            if r["line"] not in prompts:
                sys.exit(f"{a.rows}:{line_no}: line {r['line']} is not a problem of {a.dataset}")
            out.write(json.dumps({"prompt_tokens": tok.encode(prompts[r["line"]]),
                                  "tokens": tok.encode(r["output"]), "correct": bool(r["correct"])}) + "\n")
            n[bool(r["correct"])] += 1
    print(f"wrote {a.out}: {n[True]} correct, {n[False]} incorrect responses")


if __name__ == "__main__":
    main()
