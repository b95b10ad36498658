"""Fashion-MNIST from Debian's dataset-fashion-mnist and the CNN train.py
fits to it (--task fashion): 60000 training images in global batches, one
permutation per epoch from the seed; test accuracy on the test images."""
import gzip
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path, magic):
    """An idx file as a numpy array (gzip, big-endian header; checked)."""
    if not os.path.exists(path):
        sys.exit(f"{path} missing: install the Debian package dataset-fashion-mnist")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    head = np.frombuffer(raw, ">u4", 1 + dims)
    if head[0] != magic:
        sys.exit(f"{path}: bad magic {head[0]:#x}")
    shape = tuple(int(d) for d in head[1:])
    data = np.frombuffer(raw, np.uint8, offset=4 * (1 + dims))
    if data.size != np.prod(shape):
        sys.exit(f"{path}: {data.size} bytes of data, header says {shape}")
    return data.reshape(shape)


def load(data, split, n):
    # Kept as uint8 (47 MB, not 188 MB per rank): batches are scaled on the fly.
    x = read_idx(f"{data}/{split}-images-idx3-ubyte.gz", 0x803)[:n]
    y = read_idx(f"{data}/{split}-labels-idx1-ubyte.gz", 0x801)[:n]
    return torch.from_numpy(x.copy()), torch.from_numpy(y.astype(np.int64))


def as_input(images):
    return images.unsqueeze(1).float().div_(255.0).sub_(0.2860).div_(0.3530)  # Fashion-MNIST mean/std


class Net(nn.Module):
    """Two small convolutions (cheap on 2 shared cores) feeding a wide fully
    connected layer that holds 98% of the 0.8M parameters: the gradient is
    3.3 MB per step, which a 1 Gbit/s link feels."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)    # 28x28 -> pool -> 14x14x8
        self.conv2 = nn.Conv2d(8, 16, 5, padding=2)   # 14x14 -> pool -> 7x7x16
        self.fc1 = nn.Linear(7 * 7 * 16, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def evaluate(model, x, y, rank, size):
    """Test accuracy: each rank scores a slice, the counts are summed."""
    model.eval()
    part = slice(rank * len(x) // size, (rank + 1) * len(x) // size)
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for xb, yb in zip(x[part].split(1000), y[part].split(1000)):
            correct[0] += (model(as_input(xb)).argmax(1) == yb).sum()
            correct[1] += len(yb)
    dist.all_reduce(correct)
    model.train()
    return (correct[0] / correct[1]).item()


class FashionTask:
    metric = "test_accuracy"

    def __init__(self, args):
        self.train_x, self.train_y = load(args.data, "train", args.train)
        self.test_x, self.test_y = load(args.data, "t10k", args.test)
        self.sizes = {"train_images": len(self.train_x), "test_images": len(self.test_x)}

    def steps_per_epoch(self, global_batch):
        return len(self.train_x) // global_batch  # the tail that does not fill a global batch is dropped

    def model(self):
        return Net()

    def epoch_order(self, seed, epoch, steps, global_batch):
        return torch.randperm(len(self.train_x), generator=torch.Generator().manual_seed(seed * 1000 + epoch))

    def batch(self, order, b, rank, per_rank, global_batch):
        mine = order[b * global_batch + rank * per_rank:b * global_batch + (rank + 1) * per_rank]
        return as_input(self.train_x[mine]), self.train_y[mine]

    def loss(self, model, x, y):
        return F.cross_entropy(model(x), y)

    def evaluate(self, model, rank, size):
        return evaluate(model, self.test_x, self.test_y, rank, size)
