#!/usr/bin/env python3
"""Markdown table of netem.sh's JSON rows (raw/np<P>-<algo>-<density>.json).

"2k packed" is 2 * k entries at 4 value bytes plus src/core/cost_model.cc's
packedIndexBytes(k, count, 4) / k index bytes each, k = density * count.
"""
import glob, json, math, os, sys

def packed_index_bytes(nnz, count, index_bytes=4):
    if nnz <= 0:
        return 0.0
    bits = min(math.log2(max(1.0, count / nnz)) + 2.3, 8.0 * index_bytes)
    return nnz * (bits / 8 + (index_bytes + 5.0) / 128)

raw = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "raw")
rows = []
for path in glob.glob(os.path.join(raw, "np*.json")):
    with open(path) as f:
        for line in f:
            rows.append(json.loads(line))
split = {(r["nranks"], r["density"]): r["dct_us"] for r in rows if r["algo"] == "split"}
order = {"globaltopk": 0, "split": 1, "allgather": 2, "dense": 3}
rows.sort(key=lambda r: (r["nranks"], -r["density"] if r["algo"] != "dense" else 0,
                         r["algo"] == "dense", order.get(r["algo"], 9)))
print("| ranks | density | algo | libdct ms (min-max) | dense MPI ms (min-max) | dense / libdct "
      "| split / libdct | sent B/rank | received B/rank | 2k packed B | sent / 2k | received / 2k "
      "| owners kept (k) |")
print("|---:|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    n, d, P = r["count"], r["density"], r["nranks"]
    k = d * n
    two_k = 2 * (4 * k + packed_index_bytes(k, n))
    dense_algo = r["algo"] == "dense"
    sp = split.get((P, d))
    kept = "%.0f (%.0f)" % (r.get("owner_kept", 0), k) if r["algo"] == "globaltopk" else "-"
    print("| %d | %s | %s | %.1f (%.1f-%.1f) | %.1f (%.1f-%.1f) | %.2f | %s | %.0f | %.0f | %s | %s | %s | %s |" % (
        P, "-" if dense_algo else "%g%%" % (100 * d), r["algo"],
        r["dct_us"] / 1e3, r["dct_min_us"] / 1e3, r["dct_max_us"] / 1e3,
        r["dense_us"] / 1e3, r["dense_min_us"] / 1e3, r["dense_max_us"] / 1e3,
        r["dense_us"] / r["dct_us"], "%.2f" % (sp / r["dct_us"]) if sp and not dense_algo else "-",
        r["wire_bytes"], r.get("bytes_received", float("nan")),
        "-" if dense_algo else "%.0f" % two_k,
        "-" if dense_algo else "%.2f" % (r["wire_bytes"] / two_k),
        "-" if dense_algo else "%.2f" % (r.get("bytes_received", 0) / two_k), kept))
