"""The README's table from the runs' JSON files (train.py --out)."""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
names = sys.argv[1:] or ["adam", "adam-eps1e-4", "onebit-adam", "onebit-adam-preconditioned",
                         "adam-onebit-gradients", "onebit-adam-eps1e-8", "onebit-adam-per-tensor",
                         "onebit-adam-one-scale"]
print("| run | optimizer | gradient hook | eps | freeze_step | test acc. (epoch 1, 2, 3) | train loss (last epoch) "
      "| bytes/rank, whole run | less than Adam | bytes/step/rank, epochs 2-3 | less than Adam | s/epoch (2-3) | replicas identical |")
print("| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
base = None
for name in names:
    path = os.path.join(here, name + ".json")
    if not os.path.exists(path):
        print(f"| {name} | (no result: see {name}.log; onebit-adam-eps1e-8 diverged, loss NaN in epoch 1, test acc. 10.00%) |")
        continue
    r = json.load(open(path))
    ep = r["epochs"]
    late = ep[1:] or ep
    total = sum(e["bytes_per_step_per_rank"] * e["steps"] for e in ep)
    per_step = sum(e["bytes_per_step_per_rank"] * e["steps"] for e in late) / sum(e["steps"] for e in late)
    secs = sum(e["seconds"] for e in late) / len(late)
    if base is None:
        base = (total, per_step)
    accs = ", ".join(f"{100 * e['test_accuracy']:.2f}%" for e in ep)
    hook = "onebit_adam_hook" if r["optimizer"] == "onebit_adam" else r["hook"]
    scales = "a scale per tensor" if "a scale per tensor" in r["described"] else "one scale"  # older runs: one
    extra = f" ({r['exchange']}, {scales})" if r["optimizer"] == "onebit_adam" else ""
    print(f"| {name} | {r['optimizer']}{extra} | {hook} | {r['eps']:g} | {r['freeze_step'] or '-'} | {accs} "
          f"| {ep[-1]['train_loss']:.4f} | {total / 1e6:.1f} MB | {base[0] / total:.1f}x | {per_step / 1e3:.1f} KB "
          f"| {base[1] / per_step:.1f}x | {secs:.1f} | {r['replicas_identical']} |")
