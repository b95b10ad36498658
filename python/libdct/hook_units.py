"""The compressors of a DctState ("units"). A unit holds the error-feedback
state of a set of parameters, named by key: the parameter's position in the
model when the state knows the model, else id(parameter). Top-K makes a unit
of each DDP bucket; so does 1-bit, with a scale per parameter (segments),
except on CUDA, where it makes one of each parameter. When DDP re-buckets, new
units take over the residuals of the old ones (the orphans, per parameter);
a bucket that goes dense adds its parameters' orphans to what it sends."""
import itertools

import torch


def residual_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


class Unit:
    def __init__(self, keys, numels, dtype, signature, compressor, device):
        self.keys, self.numels, self.dtype, self.device = tuple(keys), tuple(numels), dtype, device
        self.signature = signature  # what the compressor was made for (kind, settings)
        self.compressor = compressor
        self.count = sum(self.numels)
        self.slices, at = {}, 0
        for k, n in zip(self.keys, self.numels):
            self.slices[k] = (at, n)
            at += n

    def residual(self):
        c = self.compressor
        return c.get_residual(torch.empty(self.count, dtype=residual_dtype(self.dtype), device=self.device))

    def close(self):
        self.compressor.close()


class Units:
    def __init__(self):
        self.by_keys = {}  # keys tuple -> Unit
        self.of = {}       # key -> Unit
        self.orphans = {}  # key -> residual of a parameter whose unit is gone
        self.rebuilds = 0  # units made to take over residuals (DDP re-bucketed, settings changed)
        self.sent = 0      # bytes the units' steps sent, read so far
        self.unread = []   # units whose last step's bytes are not read yet

    def ran(self, unit):
        """Notes a committed step of unit. Its bytes are read later: on a
        device the statistics wait for the step, which a bucket must not."""
        self.unread.append(unit)

    def sent_bytes(self, unit=None):
        """Reads the noted steps' bytes (unit's alone: before its next step,
        whose statistics replace them); the bytes read so far."""
        for u in [u for u in self.unread if unit is None or u is unit]:
            self.unread.remove(u)
            self.sent += u.compressor.stats.bytes_sent
        return self.sent

    def exact(self, keys, signature):
        u = self.by_keys.get(tuple(keys))
        return u if u is not None and u.signature == signature else None

    def covering(self, keys, signature):
        """The units that hold exactly these keys among others, or None."""
        units = {self.of.get(k) for k in keys}
        if None in units or any(u.signature != signature for u in units):
            return None
        return units

    def make(self, keys, numels, dtype, signature, create, device):
        """A fresh unit over keys, taking their residuals from the units that
        held them (those end: their other keys become orphans too)."""
        evicted = self.evict(keys)
        unit = Unit(keys, numels, dtype, signature, create(sum(numels), dtype), device)
        if signature[0] == "onebit" and len(unit.keys) > 1:  # a 1-bit scale per parameter, one exchange
            unit.compressor.set_segments([0, *itertools.accumulate(unit.numels)])
        adopted = [k for k in unit.keys if k in self.orphans]
        if adopted:
            merged = torch.zeros(unit.count, dtype=residual_dtype(dtype), device=device)
            for k in adopted:
                at, n = unit.slices[k]
                merged[at:at + n] = self.orphans[k].to(device=device, dtype=merged.dtype)
            unit.compressor.set_residual(merged)
            for k in adopted:
                del self.orphans[k]
        if evicted or adopted:
            self.rebuilds += 1
        self.add(unit)
        return unit

    def add(self, unit):
        self.by_keys[unit.keys] = unit
        for k in unit.keys:
            self.of[k] = unit

    def evict(self, keys):
        """Ends every unit holding one of keys; their residuals become orphans."""
        gone = {self.of[k] for k in keys if k in self.of}
        for u in gone:
            r = u.residual()
            for k, (at, n) in u.slices.items():
                self.orphans[k] = r[at:at + n]
                del self.of[k]
            del self.by_keys[u.keys]
            self.sent_bytes(u)
            u.close()
        return bool(gone)

    def take_orphans(self, keys):
        """{key: residual} of keys that go dense; they leave the units."""
        self.evict(keys)
        return {k: self.orphans.pop(k) for k in keys if k in self.orphans}

    def residuals(self):
        """{key: residual on the host} of every parameter that has one."""
        out = {k: r.detach().cpu().clone() for k, r in self.orphans.items()}
        for u in self.by_keys.values():
            r = u.residual().cpu()
            for k, (at, n) in u.slices.items():
                out[k] = r[at:at + n].clone()
        return out

    def close(self):
        try:
            self.sent_bytes()
        except Exception:  # a failed comm's statistics: the units close all the same
            self.unread.clear()
        for u in self.by_keys.values():
            u.close()
        self.by_keys.clear()
        self.of.clear()

