#!/usr/bin/python3
"""Golden fixtures from the SkipKV authors' released code (issue 38).

Runs, on CPU in float32 with Debian's python3-torch, the eviction of the
authors' `SkipKV.update_kv` (skipkv/compression/skipkv.py) and the sentence
functions of skipkv/modeling_nhid.py (sentence spans, Check labels, sentence
representations, the PSS and the redundant table with its λ), over planted
inputs, and writes what they decide as small text fixtures that the C++ unit
test tests/unit/authors_golden_test.cpp replays through skipkv's own code.

The authors' code is NOT part of this repository. Give the path of a checkout
of GitHub TTTTTTris/SkipKV at commit 4492840432b8a7676b973f06b38d55e83ba113d5:

    /usr/bin/python3 tools/authors_golden/gen_golden.py /path/to/SkipKV tests/data/authors_golden

Only the definitions the fixtures need are taken from their files, by name
(Python's ast), and executed unchanged: compute_attention_scores,
cal_similarity, cal_similarity_multi_batch (skipkv/utils.py), class SkipKV
(skipkv/compression/skipkv.py), and check_punct_tokens_in_forward,
extract_hidden_states_by_ranges, extract_sentence_representations,
cal_sentence_similarity_from_reprs (skipkv/modeling_nhid.py). Importing the
modules whole would need transformers and their missing analysiskv.py; the
few lines of CausalLM_forward that glue the sentence functions together are
restated in `sentence_update` below with their source lines.

Fixture formats: see tools/authors_golden/README.md.
"""
import ast
import logging
import math
import os
import random
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

AUTHORS_COMMIT = "4492840432b8a7676b973f06b38d55e83ba113d5"


def load_defs(path, names, namespace):
    """Executes the top-level definitions `names` of the Python file `path` in `namespace`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            found[node.name] = node
    missing = [n for n in names if n not in found]
    if missing:
        sys.exit(f"{path}: definitions not found: {', '.join(missing)} (is this the SkipKV checkout at {AUTHORS_COMMIT}?)")
    module = ast.Module(body=[found[n] for n in names], type_ignores=[])
    exec(compile(module, path, "exec"), namespace)


def load_authors(root):
    ns = {"torch": torch, "nn": nn, "F": F, "math": math, "logging": logging}
    load_defs(os.path.join(root, "skipkv/utils.py"),
              ["compute_attention_scores", "cal_similarity", "cal_similarity_multi_batch"], ns)
    load_defs(os.path.join(root, "skipkv/compression/skipkv.py"), ["SkipKV"], ns)
    load_defs(os.path.join(root, "skipkv/modeling_nhid.py"),
              ["check_punct_tokens_in_forward", "extract_hidden_states_by_ranges",
               "extract_sentence_representations", "cal_sentence_similarity_from_reprs"], ns)
    return ns


def fmt(x):
    return "%.9g" % x


def floats(t):
    return " ".join(fmt(v) for v in t.reshape(-1).tolist())


# ---------------------------------------------------------------------------
# Eviction: SkipKV.update_kv over a decode with planted near-duplicate keys,
# sentence ranges and a penalty table T.
# ---------------------------------------------------------------------------

def eviction_scenario(A, out_path, name, seed, pads, mask_mode, n_layers=2, n_heads=4, n_kv=2, d=8,
                      budget=24, window=4, kernel=7, mix=0.1, interval=8, prompt=12, n_gen=60):
    """mask_mode: "hf" = the layer's mask as transformers 4.53 builds it for flash_attention_2
    (masking_utils.flash_attention_mask: the 2-D padding mask of every token seen, sliced to the
    last kv_length entries, None when that slice has no pad); "exact" = a mask that marks the pads
    of the current cache at every compression (what the authors' code would do if the mask kept
    marking them)."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    rows = len(pads)
    assert prompt < budget and all(p < prompt for p in pads)
    SkipKV = A["SkipKV"]
    clusters = [SkipKV(budget=budget, window_size=window, kernel_size=kernel, mix_lambda=mix,
                       retain_ratio=0.2, retain_direction="last") for _ in range(n_layers)]

    # Sentences (inclusive global positions) per row: consecutive spans from the first real token,
    # 1..6 tokens long (1-token spans are what consecutive delimiters give in their segmentation).
    total = prompt + n_gen
    sentences = []
    for b in range(rows):
        s, spans = pads[b], []
        while s < total:
            ln = 1 if rng.random() < 0.15 else rng.randint(2, 6)
            spans.append((s, min(s + ln - 1, total - 1)))
            s += ln
        sentences.append(spans)

    # Keys / values / queries per layer, row, head, position.
    def new_key(hist):
        if hist and rng.random() < 0.3:  # a near-duplicate of an earlier key
            src = hist[rng.randrange(len(hist))]
            return src + 0.05 * torch.randn(d, generator=g)
        return torch.randn(d, generator=g)

    key_hist = [[[[] for _ in range(n_kv)] for _ in range(rows)] for _ in range(n_layers)]

    def token_kv():
        k = torch.zeros(n_layers, rows, n_kv, d)
        for l in range(n_layers):
            for b in range(rows):
                for h in range(n_kv):
                    k[l, b, h] = new_key(key_hist[l][b][h])
                    key_hist[l][b][h].append(k[l, b, h].clone())
        v = torch.randn(n_layers, rows, n_kv, d, generator=g)
        q = torch.randn(n_layers, rows, n_heads, d, generator=g)
        return k, v, q

    K = [None] * n_layers
    V = [None] * n_layers
    Qc = [None] * n_layers
    gp = [[[list(range(prompt)) for _ in range(n_kv)] for _ in range(rows)] for _ in range(n_layers)]
    ks, vs, qs = [], [], []
    for t in range(prompt):
        k, v, q = token_kv()
        ks.append(k), vs.append(v), qs.append(q)
    for l in range(n_layers):
        K[l] = torch.stack([k[l] for k in ks], dim=2)  # [rows, n_kv, P, d]
        V[l] = torch.stack([v[l] for v in vs], dim=2)
        Qc[l] = torch.stack([q[l] for q in qs], dim=2)[:, :, -window:, :]

    T = [dict() for _ in range(rows)]
    events = []
    for t in range(prompt, total):
        compress = t % interval == 0
        if compress:
            # T as the end of the previous forward left it: new entries among the sentences
            # completed by t-1 (Eq. 7 entries; λ in (0.95, 1)).
            for b in range(rows):
                for span in sentences[b]:
                    if span[1] <= t - 1 and span not in T[b] and rng.random() < 0.3:
                        T[b][span] = 0.95 + 0.05 * rng.random()
        k, v, q = token_kv()
        for l in range(n_layers):
            K[l] = torch.cat([K[l], k[l][:, :, None, :]], dim=2)
            V[l] = torch.cat([V[l], v[l][:, :, None, :]], dim=2)
            Qc[l] = torch.cat([Qc[l], q[l][:, :, None, :]], dim=2)[:, :, -window:, :]
            for b in range(rows):
                for h in range(n_kv):
                    gp[l][b][h].append(t)
        if not compress:
            continue
        completed = [[s for s in sentences[b] if s[1] <= t] for b in range(rows)]
        for l in range(n_layers):
            n = K[l].shape[2]
            if n < budget:
                continue
            if mask_mode == "hf":
                full = torch.tensor([[p >= pads[b] for p in range(t + 1)] for b in range(rows)])
                mask = full[:, -n:]
                mask = None if bool(mask.all()) else mask
            else:
                mask = torch.tensor([[p >= pads[b] for p in gp[l][b][0]] for b in range(rows)])
                mask = None if bool(mask.all()) else mask
            K_in, Q_in, gp_in = K[l].clone(), Qc[l].clone(), [[list(x) for x in r] for r in gp[l]]
            T_in = [dict(x) for x in T]
            K_out, V_out = clusters[l].update_kv(K[l], Qc[l], V[l], l, completed_punct_ranges=completed,
                                                 remove_punct_ranges=T, current_pos=[t + 1] * rows,
                                                 padding_mask=mask)
            # Kept slots: the output rows are gathered copies of input rows, ascending.
            for b in range(rows):
                kept = []
                for h in range(n_kv):
                    j, sel = 0, []
                    for i in range(K_out.shape[2]):
                        while not torch.equal(K_in[b, h, j], K_out[b, h, i]):
                            j += 1
                        sel.append(j)
                        j += 1
                    kept.append(sel)
                ranges = [sorted((key[0], key[1], lo, hi) for key, (lo, hi) in clusters[l].punct_ranges[b][h].items())
                          for h in range(n_kv)]
                events.append(dict(step=t, layer=l, row=b, n=n, mask=mask is not None, T=T_in[b],
                                   keys=K_in[b], queries=Q_in[b], genpos=gp_in[b],
                                   kept=[[gp_in[b][h][s] for s in kept[h]] for h in range(n_kv)],
                                   ranges=ranges))
                for h in range(n_kv):
                    gp[l][b][h] = [gp_in[b][h][s] for s in kept[h]]
            K[l], V[l] = K_out, V_out
    empty_heads = sum(1 for e in events for r in e["ranges"] if not r)
    with open(out_path, "w") as f:
        f.write("skipkv-authors-golden-eviction 1\n")
        f.write(f"# generated by tools/authors_golden/gen_golden.py from TTTTTTris/SkipKV@{AUTHORS_COMMIT}\n")
        f.write(f"scenario {name} mask_mode {mask_mode}\n")
        f.write(f"dims {n_layers} {rows} {n_heads} {n_kv} {d}\n")
        f.write(f"policy {budget} {window} {kernel} {fmt(mix)} {interval}\n")
        f.write("pads " + " ".join(str(p) for p in pads) + "\n")
        f.write(f"events {len(events)}\n")
        for i, e in enumerate(events):
            f.write(f"event {i} step {e['step']} layer {e['layer']} row {e['row']} n {e['n']} mask {int(e['mask'])}\n")
            f.write(f"T {len(e['T'])}\n")
            for (s, en), lam in sorted(e["T"].items()):
                f.write(f"{s} {en} {fmt(lam)}\n")
            f.write("keys " + floats(e["keys"]) + "\n")
            f.write(f"queries {e['queries'].shape[1]} " + floats(e["queries"]) + "\n")
            for h in range(n_kv):
                f.write("genpos " + " ".join(map(str, e["genpos"][h])) + "\n")
                f.write("kept " + " ".join(map(str, e["kept"][h])) + "\n")
                f.write(f"ranges {len(e['ranges'][h])}" + "".join(f" {a} {b_} {c} {d_}" for a, b_, c, d_ in e["ranges"][h]) + "\n")
    print(f"{out_path}: {len(events)} compressions x rows, {empty_heads} head range tables left empty")


# ---------------------------------------------------------------------------
# Sentence side: spans, Check labels, sentence representations, PSS and T.
# ---------------------------------------------------------------------------

class AuthorsModelState:
    """The attributes CausalLM_forward's sentence code reads and writes (their model object)."""


def sentence_scenario(A, out_path, name, seed, pads, tau=0.9, prompt=14, n_gen=90, interval=16, d=16):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    rows = len(pads)
    DELIMS = [1, 2]         # stand-ins for the ids of "\n", ".\n", ... (their newline_token_ids)
    CHECKS = [7, 8, 9]      # stand-ins for the ids of "Alternatively", "Wait", "again"
    total = prompt + n_gen
    # Token streams: sentences of 1..7 tokens ending in a delimiter; a sentence may reuse an
    # earlier sentence's hidden rows (a planted near-duplicate, cosine ~0.99 after noise).
    ids = [[0] * total for _ in range(rows)]
    hid = torch.zeros(rows, total, d)
    for b in range(rows):
        p = pads[b]
        sents = []
        first = True
        while p < total:
            ln = rng.randint(1, 7)
            ln = min(ln, total - p)
            toks = [rng.randint(10, 99) for _ in range(ln)]
            toks[-1] = rng.choice(DELIMS)
            in_prompt = p < prompt
            if ln >= 2 and rng.random() < 0.25 and (not in_prompt or (b == 0 and first)):
                toks[rng.randrange(ln - 1)] = rng.choice(CHECKS)
                first = False if in_prompt else first
            if sents and rng.random() < 0.3:
                src = sents[rng.randrange(len(sents))]
                rows_src = hid[b, src[0]:src[1] + 1]
                base = rows_src[torch.randint(len(rows_src), (ln,), generator=g)]
                hid[b, p:p + ln] = base + 0.02 * torch.randn(ln, d, generator=g)
            else:
                topic = torch.randn(d, generator=g)
                hid[b, p:p + ln] = topic + 0.6 * torch.randn(ln, d, generator=g)
            ids[b][p:p + ln] = toks
            sents.append((p, p + ln - 1))
            p += ln
        # The prompt must end a sentence in every row (their extract_hidden_states_by_ranges needs
        # at least one completed range in the prefill forward).
        assert any(e < prompt for (_, e) in sents)
    ids_t = torch.tensor(ids)
    attn = torch.tensor([[1 if p >= pads[b] else 0 for p in range(total)] for b in range(rows)])

    m = AuthorsModelState()
    m.check_token_ids = CHECKS
    m.punct_token_ids = DELIMS
    m._accumulated_hidden_states = []
    check = A["check_punct_tokens_in_forward"]
    extract = A["extract_hidden_states_by_ranges"]

    def sentence_update():
        # CausalLM_forward, modeling_nhid.py (the `if is_newline and ... 'skipkv'` block).
        last_token_pos = [0] * rows
        if any(m.labeled_sentence_ranges_per_batch):
            last_token_pos = [s[-1][0][-1] for s in m.labeled_sentence_ranges_per_batch]
        new_range_starts = [0] * rows
        if any(m._sentence_representations_per_batch):
            new_range_starts = [list(s.keys())[-1][-1] for s in m._sentence_representations_per_batch]
        A["extract_sentence_representations"](m._accumulated_hidden_states, m._sentence_representations_per_batch,
                                              last_token_pos)
        A["cal_sentence_similarity_from_reprs"](m._sentence_representations_per_batch,
                                                m._remove_punct_ranges_per_batch, new_range_starts, tau)
        return [len([1 for (_, lab) in m.labeled_sentence_ranges_per_batch[i] if lab == "Check"]) for i in range(rows)]

    updates = []
    length = 0
    for t in range(prompt - 1, total):
        if t == prompt - 1:  # the prefill forward
            inp, h, mask = ids_t[:, :prompt], hid[:, :prompt], attn[:, :prompt]
        else:
            inp, h, mask = ids_t[:, t:t + 1], hid[:, t:t + 1], attn[:, :t + 1]
        check(m, inp, mask)
        extract(h.clone(), m.completed_punct_ranges, m._accumulated_hidden_states, m.current_position)
        length += inp.shape[1]
        if length % interval == 0:
            counts = sentence_update()
            updates.append(dict(pos=t, checks=counts,
                                T=[dict(x) for x in m._remove_punct_ranges_per_batch],
                                sentences=[list(x) for x in m.labeled_sentence_ranges_per_batch]))
    with open(out_path, "w") as f:
        f.write("skipkv-authors-golden-sentences 1\n")
        f.write(f"# generated by tools/authors_golden/gen_golden.py from TTTTTTris/SkipKV@{AUTHORS_COMMIT}\n")
        f.write(f"scenario {name}\n")
        f.write(f"dims {rows} {d} {prompt} {total}\n")
        f.write(f"tau {fmt(tau)}\n")
        f.write("delimiters " + " ".join(map(str, DELIMS)) + "\n")
        f.write("checks " + " ".join(map(str, CHECKS)) + "\n")
        f.write("pads " + " ".join(map(str, pads)) + "\n")
        for b in range(rows):
            f.write("ids " + " ".join(map(str, ids[b])) + "\n")
            f.write("hidden " + floats(hid[b]) + "\n")
        f.write(f"updates {len(updates)}\n")
        for u in updates:
            f.write(f"update pos {u['pos']}\n")
            for b in range(rows):
                sents = u["sentences"][b]
                f.write(f"row {b} checks {u['checks'][b]} sentences {len(sents)}" +
                        "".join(f" {s} {e} {int(lab == 'Check')}" for (s, e), lab in sents) + "\n")
                f.write(f"T {len(u['T'][b])}" + "".join(f" {s} {e} {fmt(lam)}" for (s, e), lam in sorted(u["T"][b].items())) + "\n")
    print(f"{out_path}: {len(updates)} PSS updates, |T| = {[len(x) for x in updates[-1]['T']]}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, out = sys.argv[1], sys.argv[2]
    logging.disable(logging.CRITICAL)
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    A = load_authors(root)
    os.makedirs(out, exist_ok=True)
    eviction_scenario(A, os.path.join(out, "eviction_ragged.txt"), "ragged", 38001, pads=[0], mask_mode="hf")
    eviction_scenario(A, os.path.join(out, "eviction_padded_hf.txt"), "padded_hf", 38002, pads=[3, 0, 5], mask_mode="hf")
    eviction_scenario(A, os.path.join(out, "eviction_padded_exact.txt"), "padded_exact", 38002, pads=[3, 0, 5],
                      mask_mode="exact")
    sentence_scenario(A, os.path.join(out, "sentences.txt"), "sentences", 38003, pads=[2, 0])


if __name__ == "__main__":
    main()
