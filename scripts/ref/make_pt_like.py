#!/usr/bin/python3
"""Write .pt cartridge files that imitate torch.save's layout exactly, with
only the standard library (pickle, zipfile): no torch needed. For the tests
of frt's native .pt reader (tests/test_cartridge.c) and the seeds of
fuzz/fuzz_cartridge_pt.c. The torch-made fixtures come from
scripts/ref/make_cartridge_fixtures.py (GPU machine); this one also writes
the files torch would never write (fault paths).

    /usr/bin/python3 scripts/ref/make_pt_like.py OUT_DIR
    /usr/bin/python3 scripts/ref/make_pt_like.py OUT_DIR --one NAME.pt L H D TF TT DTYPE [params]
        (one file of that shape: layers, KV heads, head_dim, frozen and
        trainable tokens, f32|bf16|f16; "params": the ParameterList shape)

What torch.save (torch/serialization.py, _save with the zip format,
pickle protocol 2) writes, and this imitates:
  archive/data.pkl        the pickle; tensors reduce to
                          torch._utils._rebuild_tensor_v2(storage, offset,
                          size, stride, requires_grad, OrderedDict()), a
                          storage is the persistent id
                          ('storage', torch.<T>Storage, key, 'cpu', numel),
                          nn.Parameter reduces to
                          torch._utils._rebuild_parameter(tensor, True,
                          OrderedDict()), an nn.Module (ParameterList) is
                          NEWOBJ(cls) + BUILD(its __dict__)
  archive/byteorder       "little"
  archive/data/KEY        the raw storage bytes
  archive/version         "3\\n"
  archive/.data/serialization_id

Files (every tensor [1, H, T, D] per layer, values from random.Random(seed)):
  recipe_f32.pt           dict of plain lists, f32, 2 layers, H 2, D 4,
                          frozen 3 (frozen_keys/values) + trainable 5 tokens
  trainable_cache_bf16.pt dict of ParameterList of Parameter, bf16, 3 layers,
                          H 1, D 8, frozen 2 + trainable 4
  fixed_f16.pt            older spelling fixed_keys/fixed_values, f16, and a
                          non-contiguous view (a slice of a wider storage)
  trainable_only_f32.pt   no frozen part, 2 layers, H 2, D 4, 6 tokens, keys
                          as transposed views (a [1, H, D, T] storage)
  *.expected.f32          the expected K/V in frt's layout: per layer K then V
                          [T, H, D] f32, concatenated
  bad_global.pt           a pickle calling posix.system (never run by frt)
  bad_truncated.pt        recipe_f32.pt cut in half
  bad_storage_size.pt     a storage entry one element short
  bad_rank.pt             3-dim tensors
  bad_layers.pt           trainable_keys and trainable_values of different lengths
  bad_byteorder.pt        byteorder "big"
  bad_key.pt              an unexpected top-level key
  bad_opcode.pt           a pickle using an opcode outside the allowlist (INST)
  bad_compressed.pt       entries deflated (torch stores them)
"""
import collections
import io
import os
import pickle
import random
import struct
import sys
import types
import zipfile


def module(name):
    m = sys.modules.get(name) or types.ModuleType(name)
    sys.modules[name] = m
    return m


def named(obj, mod, name):
    obj.__module__ = mod
    obj.__qualname__ = name
    obj.__name__ = name
    setattr(module(mod), name, obj)
    return obj


for m in ("torch", "torch._utils", "torch.nn", "torch.nn.modules", "torch.nn.modules.container"):
    module(m)


def _rebuild_tensor_v2(*a):
    raise RuntimeError("never called")


def _rebuild_parameter(*a):
    raise RuntimeError("never called")


named(_rebuild_tensor_v2, "torch._utils", "_rebuild_tensor_v2")
named(_rebuild_parameter, "torch._utils", "_rebuild_parameter")
STORAGE = {}
for dt, name in (("f32", "FloatStorage"), ("bf16", "BFloat16Storage"), ("f16", "HalfStorage")):
    STORAGE[dt] = named(type(name, (), {}), "torch", name)


class ParameterList:
    """Pickles as torch's nn.ParameterList does: NEWOBJ + BUILD(__dict__)."""

    def __init__(self, params):
        self.training = True
        self._parameters = collections.OrderedDict((str(i), p) for i, p in enumerate(params))
        self._buffers = collections.OrderedDict()
        self._non_persistent_buffers_set = set()
        self._backward_pre_hooks = collections.OrderedDict()
        self._backward_hooks = collections.OrderedDict()
        self._is_full_backward_hook = None
        self._forward_hooks = collections.OrderedDict()
        self._forward_hooks_with_kwargs = collections.OrderedDict()
        self._forward_hooks_always_called = collections.OrderedDict()
        self._forward_pre_hooks = collections.OrderedDict()
        self._forward_pre_hooks_with_kwargs = collections.OrderedDict()
        self._state_dict_hooks = collections.OrderedDict()
        self._state_dict_pre_hooks = collections.OrderedDict()
        self._load_state_dict_pre_hooks = collections.OrderedDict()
        self._load_state_dict_post_hooks = collections.OrderedDict()
        self._modules = collections.OrderedDict()
        self._size = len(params)


named(ParameterList, "torch.nn.modules.container", "ParameterList")


class Storage:
    def __init__(self, key, dt, raw, numel):
        self.key, self.dt, self.raw, self.numel = key, dt, raw, numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __reduce_ex__(self, proto):
        return (_rebuild_tensor_v2,
                (self.storage, self.offset, tuple(self.size), tuple(self.stride), False,
                 collections.OrderedDict()))


class Parameter:
    def __init__(self, t):
        self.t = t

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self.t, True, collections.OrderedDict()))


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", STORAGE[obj.dt], obj.key, "cpu", obj.numel)
        return None


def encode(dt, vals):
    if dt == "f32":
        return struct.pack("<%df" % len(vals), *vals)
    if dt == "f16":
        return struct.pack("<%de" % len(vals), *vals)
    out = bytearray()
    for v in vals:  # bf16: round to nearest even
        u = struct.unpack("<I", struct.pack("<f", v))[0]
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
        out += struct.pack("<H", u)
    return bytes(out)


def decode(dt, raw):
    if dt == "f32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dt == "f16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
            for (h,) in struct.iter_unpack("<H", raw)]


class Maker:
    """Builds the tensors of one file and the expected frt layout."""

    def __init__(self, dt, seed):
        self.dt, self.rng, self.storages = dt, random.Random(seed), []

    def tensor(self, H, T, D, pad=0, transpose=False):
        """A [1, H, T, D] tensor; pad > 0 makes it a view of a wider storage
        ([1, H, T, D + pad], the last dim sliced), transpose a view of a
        [1, H, D, T] storage (the last two dims swapped): strides that are not
        contiguous."""
        Dw = D + pad
        vals = [self.rng.uniform(-2, 2) for _ in range(H * T * Dw)]
        raw = encode(self.dt, vals)
        st = Storage(str(len(self.storages)), self.dt, raw, H * T * Dw)
        self.storages.append(st)
        dec = decode(self.dt, raw)
        if transpose:  # storage [1, H, D, T]; frt layout [T, H, D]
            frt = [dec[(h * D + d) * T + t] for t in range(T) for h in range(H) for d in range(D)]
            return Tensor(st, 0, [1, H, T, D], [H * D * T, D * T, 1, T]), frt
        frt = [dec[(h * T + t) * Dw + d] for t in range(T) for h in range(H) for d in range(D)]
        return Tensor(st, 0, [1, H, T, D], [H * T * Dw, T * Dw, Dw, 1]), frt


def cartridge(dt, seed, L, H, D, Tf, Tt, params=False, fixed=False, pad=0, transpose=False):
    mk = Maker(dt, seed)
    groups = {}
    expected = []
    tk, tv, fk, fv = [], [], [], []
    for _ in range(L):
        k_f = mk.tensor(H, Tf, D, pad, transpose) if Tf else None
        v_f = mk.tensor(H, Tf, D, pad) if Tf else None
        k_t = mk.tensor(H, Tt, D, pad, transpose)
        v_t = mk.tensor(H, Tt, D, pad)
        tk.append(k_t[0]), tv.append(v_t[0])
        if Tf:
            fk.append(k_f[0]), fv.append(v_f[0])
        expected += (k_f[1] if Tf else []) + k_t[1] + (v_f[1] if Tf else []) + v_t[1]
    wrap = (lambda ts: ParameterList([Parameter(t) for t in ts])) if params else list
    groups["trainable_keys"], groups["trainable_values"] = wrap(tk), wrap(tv)
    if Tf:
        pre = "fixed" if fixed else "frozen"
        groups[pre + "_keys"], groups[pre + "_values"] = wrap(fk), wrap(fv)
    return groups, mk.storages, expected


def pickle_bytes(obj):
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def write_zip(path, pkl, storages, byteorder=b"little", short=None, method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", method) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", byteorder)
        for st in storages:
            raw = st.raw[:-short] if short and st is storages[0] else st.raw
            z.writestr("archive/data/" + st.key, raw)
        z.writestr("archive/version", b"3\n")
        z.writestr("archive/.data/serialization_id", b"0123456789")


def write(out, name, groups, storages, expected=None, **kw):
    write_zip(os.path.join(out, name), pickle_bytes(groups), storages, **kw)
    if expected is not None:
        with open(os.path.join(out, name.replace(".pt", ".expected.f32")), "wb") as f:
            f.write(struct.pack("<%df" % len(expected), *expected))


class System:
    def __reduce__(self):
        return (os.system, ("echo frt must never run this",))


def main():
    if len(sys.argv) not in (2, 10, 11) or (len(sys.argv) > 2 and sys.argv[2] != "--one"):
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 2:
        L, H, D, Tf, Tt = (int(x) for x in sys.argv[4:9])
        params = len(sys.argv) == 11 and sys.argv[10] == "params"
        write(out, sys.argv[3], *cartridge(sys.argv[9], 12, L, H, D, Tf, Tt, params=params))
        return
    write(out, "recipe_f32.pt", *cartridge("f32", 1, 2, 2, 4, 3, 5))
    write(out, "trainable_cache_bf16.pt", *cartridge("bf16", 2, 3, 1, 8, 2, 4, params=True))
    write(out, "fixed_f16.pt", *cartridge("f16", 3, 2, 2, 4, 1, 3, fixed=True, pad=2))
    write(out, "trainable_only_f32.pt", *cartridge("f32", 4, 2, 2, 4, 0, 6, transpose=True))

    g, st, _ = cartridge("f32", 5, 2, 2, 4, 3, 5)
    g["trainable_keys"].append(System())
    write(out, "bad_global.pt", g, st)
    good = open(os.path.join(out, "recipe_f32.pt"), "rb").read()
    with open(os.path.join(out, "bad_truncated.pt"), "wb") as f:
        f.write(good[: len(good) // 2])
    g, st, _ = cartridge("f32", 6, 2, 2, 4, 3, 5)
    write(out, "bad_storage_size.pt", g, st, short=4)
    g, st, _ = cartridge("f32", 7, 2, 2, 4, 0, 5)
    for t in g["trainable_keys"] + g["trainable_values"]:
        t.size, t.stride = t.size[1:], t.stride[1:]
    write(out, "bad_rank.pt", g, st)
    g, st, _ = cartridge("f32", 8, 2, 2, 4, 0, 5)
    g["trainable_values"].pop()
    write(out, "bad_layers.pt", g, st)
    g, st, _ = cartridge("f32", 9, 2, 2, 4, 0, 5)
    write(out, "bad_byteorder.pt", g, st, byteorder=b"big")
    g, st, _ = cartridge("f32", 10, 2, 2, 4, 0, 5)
    g["optimizer"] = [1, 2]
    write(out, "bad_key.pt", g, st)
    g, st, _ = cartridge("f32", 11, 1, 1, 2, 0, 1)
    pkl = pickle_bytes(g)
    pkl = pkl[:2] + b"(i__main__\nX\n" + pkl[2:]  # INST: protocol 0 instance creation
    write_zip(os.path.join(out, "bad_opcode.pt"), pkl, st)
    g, st, _ = cartridge("f32", 12, 2, 2, 4, 0, 5)
    write(out, "bad_compressed.pt", g, st, method=zipfile.ZIP_DEFLATED)


if __name__ == "__main__":
    main()
