"""A small transformer language model on English text that ships in a
Debian package (--task charlm): the `fortunes` package's cookie files
(/usr/share/games/fortunes, 2.6 MB), read as bytes, modelled byte by byte.

The files are concatenated in name order; the last 5% is held out. An
epoch is as many global batches of random windows as it takes to cover the
training bytes once (windows drawn from the seed, the same in every run);
the held-out bytes are cut into consecutive windows and scored in full.
The metric is the held-out cross entropy in bits per byte."""
import math
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

TEXT = "/usr/share/games/fortunes"


def load_text(folder):
    """Every cookie file (not the .dat indexes nor the .u8 links) as one byte tensor."""
    if not os.path.isdir(folder):
        sys.exit(f"{folder} missing: install the Debian package fortunes")
    names = sorted(n for n in os.listdir(folder) if "." not in n and not os.path.islink(os.path.join(folder, n)))
    raw = b"".join(open(os.path.join(folder, n), "rb").read() for n in names)
    if len(raw) < 100000:
        sys.exit(f"{folder}: only {len(raw)} bytes of text")
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()


class CharTransformer(nn.Module):
    """Pre-norm causal transformer over bytes: embedding + learned positions,
    `layers` encoder layers (width d, 4 heads, 4d feed-forward, no dropout),
    a final norm and a linear read-out to 256 bytes."""

    def __init__(self, context, d=128, layers=2, heads=4):
        super().__init__()
        self.embed = nn.Embedding(256, d)
        self.position = nn.Parameter(torch.zeros(context, d))
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                                               norm_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 256)
        self.register_buffer("causal", torch.triu(torch.full((context, context), float("-inf")), 1),
                             persistent=False)
        nn.init.normal_(self.position, std=0.02)

    def forward(self, x):
        t = x.shape[1]
        h = self.embed(x) + self.position[:t]
        for block in self.blocks:
            h = block(h, src_mask=self.causal[:t, :t])
        return self.head(self.norm(h))


class CharLMTask:
    metric = "test_bits_per_byte"

    def __init__(self, args):
        text = load_text(args.text)
        cut = len(text) * 95 // 100
        self.train, self.held = text[:cut], text[cut:]
        self.context = args.context
        self.sizes = {"train_bytes": len(self.train), "test_bytes": len(self.held)}

    def steps_per_epoch(self, global_batch):
        return len(self.train) // (global_batch * self.context)

    def model(self):
        return CharTransformer(self.context)

    def epoch_order(self, seed, epoch, steps, global_batch):
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        return torch.randint(0, len(self.train) - self.context, (steps * global_batch,), generator=g)

    def windows(self, text, starts):
        at = starts.unsqueeze(1) + torch.arange(self.context + 1)
        w = text[at]
        return w[:, :-1], w[:, 1:]

    def batch(self, order, b, rank, per_rank, global_batch):
        return self.windows(self.train, order[b * global_batch + rank * per_rank:
                                              b * global_batch + (rank + 1) * per_rank])

    def loss(self, model, x, y):
        return F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))

    def evaluate(self, model, rank, size):
        """Held-out bits per byte: each rank scores a slice of the windows, the sums are summed."""
        model.eval()
        starts = torch.arange(0, len(self.held) - self.context, self.context)
        mine = starts[rank * len(starts) // size:(rank + 1) * len(starts) // size]
        total = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for chunk in mine.split(256):
                x, y = self.windows(self.held, chunk)
                total[0] += F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1), reduction="sum").double()
                total[1] += y.numel()
        dist.all_reduce(total)
        model.train()
        return (total[0] / total[1]).item() / math.log(2)
