#!/usr/bin/env python3
"""The plotting step of `skipkv eval report` (issue 12 item 2).

    make_report.py REPORT_DATA.json OUT_DIR

reads the tidy JSON the C++ side writes (src/eval/report.h, schema
"skipkv-report/1") and writes, with matplotlib (Debian's python3-matplotlib):
  OUT_DIR/plots/*.png   one file per plot
  OUT_DIR/report.html   every plot embedded (data: URIs), self-contained
  OUT_DIR/eviction.html the eviction view (only when the data has one): one
                        generation's tokens, coloured kept / evicted for one
                        (layer, KV head), with a slider over the compressions
Plots: accuracy (pass@1) vs KV budget and mean generated length vs budget per
method and results file (paper Fig. 9/10; FullKV as a dashed line), throughput
vs batch size per method (Table 1's runs), and per sample the share of similar
sentence pairs (PSS >= 0.95 among the pairs compared) and the non-execution
sentence ratio, split by correct / incorrect (Fig. 14). A plot
without data is replaced by a sentence saying why. Exit code 0 on success.
"""
import base64
import html
import io
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def png_of(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


class Plots:
    """Collects (title, png bytes or None, note) in page order."""

    def __init__(self, out_dir):
        self.items = []
        self.dir = os.path.join(out_dir, "plots")
        os.makedirs(self.dir, exist_ok=True)

    def add(self, name, title, fig=None, note=""):
        data = None
        if fig is not None:
            data = png_of(fig)
            with open(os.path.join(self.dir, name + ".png"), "wb") as f:
                f.write(data)
        self.items.append((title, data, note))


def budget_curves(section, key):
    """{method: [(budget, value)]} for evicting methods, and {method: value} for fullkv (budget 0)."""
    curves, flat = {}, {}
    for s in section["summary"]:
        if s["budget"] == 0:
            flat[s["method"]] = s[key]
        else:
            curves.setdefault(s["method"], []).append((s["budget"], s[key]))
    return {m: sorted(v) for m, v in curves.items()}, flat


def plot_vs_budget(plots, idx, section, key, ylabel, name):
    curves, flat = budget_curves(section, key)
    title = "%s vs KV budget: %s (%s)" % (ylabel, section["file"], section["dataset"])
    if not curves and not flat:
        plots.add(name, title, note="no rows")
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for m, pts in sorted(curves.items()):
        ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", label=m)
    for m, v in sorted(flat.items()):
        ax.axhline(v, linestyle="--", color="black", label=m)
    ax.set_xlabel("KV budget B (slots per layer and KV head)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    plots.add("%s_%d" % (name, idx), title, fig)


def plot_throughput(plots, tp):
    title = "Throughput vs batch size"
    if not tp:
        plots.add("throughput", title, note="no throughput data (give `skipkv bench throughput --json` "
                                             "output as DIR/throughput.json or --throughput)")
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for m in tp["methods"]:
        pts = sorted((b["batch"], b["tokens_per_s"]) for b in m.get("batches", []))
        if pts:
            label = "%s (B=%d, max batch %d)" % (m["method"], m.get("budget", 0), m["max_batch"])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xlabel("batch size")
    ax.set_ylabel("generated tokens/s (end to end)")
    ax.set_title("%s: %s, KV memory %.2f GiB" % (title, tp.get("model", ""), tp.get("kv_memory_bytes", 0) / 2**30),
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    plots.add("throughput", title, fig)


def plot_sentence_stats(plots, idx, section):
    title = "Similar sentence pairs and non-execution ratio: %s (%s)" % (section["file"], section["dataset"])
    groups = {}
    for s in section["samples"]:
        if "similarity_ratio" in s:
            label = "%s@%d" % (s["method"], s["budget"])
            g = groups.setdefault(label, {True: [], False: []})
            # The pair share (Fig. 14) is absent from rows written before the
            # tracker counted pairs: None, left out of that panel's means.
            g[bool(s["correct"])].append((s.get("pair_similarity_ratio"), s["nonexec_ratio"]))
    if not groups:
        plots.add("sentences_%d" % idx, title,
                  note="no sentence statistics: only rows of SkipKV's sentence tracker (policy skipkv, and "
                       "FullKV rows of skipkv eval) record them")
        return
    labels = sorted(groups)
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 4.0))
    width = 0.38
    for ax, k, name in ((axes[0], 0, "similar sentence pairs (PSS >= 0.95) / pairs compared"),
                        (axes[1], 1, "non-execution ratio")):
        for off, correct, color in ((-width / 2, True, "tab:green"), (width / 2, False, "tab:red")):
            means = []
            for lab in labels:
                vals = [v[k] for v in groups[lab][correct] if v[k] is not None]
                means.append(sum(vals) / len(vals) if vals else 0.0)
            ax.bar([i + off for i in range(len(labels))], means, width,
                   color=color, label="correct" if correct else "incorrect")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("mean per sample")
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    plots.add("sentences_%d" % idx, title, fig)


PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:1em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}
th:first-child,td:first-child{{text-align:left}} .note{{color:#a00}}</style></head>
<body>
{body}
</body></html>
"""


def summary_table(section):
    rows = ["<tr><th>method</th><th>budget</th><th>rows</th><th>pass@1 (%)</th><th>mean tokens</th>"
            "<th>KV peak (MiB)</th><th>compressions</th></tr>"]
    for s in section["summary"]:
        rows.append("<tr><td>%s</td><td>%d</td><td>%d</td><td>%.1f</td><td>%.1f</td><td>%.3f</td><td>%.1f</td></tr>"
                    % (html.escape(s["method"]), s["budget"], s["rows"], s["pass@1"], s["tokens_mean"],
                       s["kv_peak_bytes_max"] / 2**20, s["compressions_mean"]))
    return "<table>%s</table>" % "".join(rows)


def write_report(data, out_dir):
    plots = Plots(out_dir)
    for i, sec in enumerate(data["sections"]):
        plot_vs_budget(plots, i, sec, "pass@1", "accuracy pass@1 (%)", "accuracy")
        plot_vs_budget(plots, i, sec, "tokens_mean", "mean generated tokens", "length")
        plot_sentence_stats(plots, i, sec)
    plot_throughput(plots, data.get("throughput"))
    body = ["<h1>skipkv eval report</h1>"]
    for sec in data["sections"]:
        body.append("<h2>%s: %s, %s</h2>" % tuple(html.escape(str(sec[k])) for k in ("file", "dataset", "model")))
        body.append(summary_table(sec))
    for title, png, note in plots.items:
        body.append("<h2>%s</h2>" % html.escape(title))
        if png is None:
            body.append('<p class="note">%s</p>' % html.escape(note))
        else:
            body.append('<img class="plot" alt="%s" onload="this.dataset.loaded=\'1\'" src="data:image/png;base64,%s">'
                        % (html.escape(title), base64.b64encode(png).decode()))
    with open(os.path.join(out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(PAGE.format(title="skipkv eval report", body="\n".join(body)))


EVICTION_SCRIPT = """
const D = JSON.parse(document.getElementById('data').textContent);
const slider = document.getElementById('slider');
const label = document.getElementById('label');
const text = document.getElementById('text');
slider.max = D.compressions.length - 1;
const spans = D.pieces.map((p, i) => {
  const s = document.createElement('span');
  s.className = 'tok';
  s.title = 'position ' + i;
  s.textContent = p;
  text.appendChild(s);
  return s;
});
function keptSet(c) {
  const k = new Set();
  for (const [a, b] of c.kept) for (let i = a; i <= b; ++i) k.add(i);
  return k;
}
// Positions in the cache when compression c ran: up to its newest kept one
// (the recent window is always kept); the trace's l is the length before the
// compressing forward (0 for a prompt compression).
function horizon(c) {
  let end = 0;
  for (const [a, b] of c.kept) end = Math.max(end, b + 1);
  return end;
}
function show(idx) {
  const c = D.compressions[idx];
  const kept = keptSet(c), end = horizon(c);
  const prev = idx > 0 ? keptSet(D.compressions[idx - 1]) : null;
  const prevEnd = idx > 0 ? horizon(D.compressions[idx - 1]) : 0;
  let nk = 0, ne = 0;
  spans.forEach((s, i) => {
    let cls = 'future';
    if (i < end) {
      if (kept.has(i)) { cls = 'kept'; ++nk; }
      else { cls = (prev === null || prev.has(i) || i >= prevEnd) ? 'evicted-now' : 'evicted'; ++ne; }
    }
    s.className = 'tok ' + cls;
  });
  label.textContent = 'compression ' + (idx + 1) + ' of ' + D.compressions.length + ': ' + end +
      ' positions, ' + c.n + ' slots before -> ' + nk + ' kept, ' + ne + ' evicted so far';
  document.body.dataset.shown = String(idx);
}
slider.addEventListener('input', () => show(Number(slider.value)));
show(0);
"""

EVICTION_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:1em auto}}
#text{{font-family:monospace;white-space:pre-wrap;line-height:1.6;border:1px solid #ccc;padding:8px}}
.kept{{background:#bfe8bf}} .evicted{{background:#f3c4c4;color:#777;text-decoration:line-through}}
.evicted-now{{background:#e06060;color:#fff;text-decoration:line-through}} .future{{color:#bbb}}
.legend span{{padding:0 6px;margin-right:6px}}</style></head>
<body>
<h1>{title}</h1>
<p>{method}. The prompt is the first {prompt} positions. Slide over the compressions: green = kept in the cache
after it, dark red = evicted by it, light red = evicted earlier, grey = not yet generated.</p>
<p class="legend"><span class="kept">kept</span><span class="evicted-now">evicted now</span>
<span class="evicted">evicted before</span><span class="future">not yet generated</span></p>
<input type="range" id="slider" min="0" max="0" value="0" step="1" style="width:100%">
<p id="label"></p>
<div id="text"></div>
<script type="application/json" id="data">{data}</script>
<script>{script}</script>
</body></html>
"""


def write_eviction(ev, out_dir):
    title = "Eviction view: layer %d, KV head %d, request %d" % (ev["layer"], ev["head"], ev["seq"])
    m = ev.get("method") or {}
    method = "Method %s (policy %s, budget %s)" % (html.escape(str(m.get("name", "?"))),
                                                   html.escape(str(m.get("policy", "?"))),
                                                   html.escape(str(m.get("budget", "?"))))
    data = json.dumps({"pieces": ev["pieces"], "compressions": ev["compressions"]}).replace("</", "<\\/")
    with open(os.path.join(out_dir, "eviction.html"), "w", encoding="utf-8") as f:
        f.write(EVICTION_PAGE.format(title=html.escape(title), method=method, prompt=ev["prompt_tokens"],
                                     data=data, script=EVICTION_SCRIPT))


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: make_report.py REPORT_DATA.json OUT_DIR\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        data = json.load(f)
    if data.get("schema") != "skipkv-report/1":
        sys.stderr.write("make_report.py: %s: schema is %r, expected 'skipkv-report/1'\n" % (argv[1], data.get("schema")))
        return 1
    write_report(data, argv[2])
    if data.get("eviction"):
        write_eviction(data["eviction"], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
