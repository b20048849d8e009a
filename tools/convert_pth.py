#!/usr/bin/env python3
"""Converts a PyTorch checkpoint with the official key names (an Agent-Attention / FLatten / Swin /
PVT / CSwin / DeiT release, or a state_dict saved from tools/ref) into a .safetensors file that
`eval --ckpt` loads: float32 tensors under the same names, buffers vitc recomputes dropped
(relative_position_index, attn_mask), and the model config in the header. A 1000-class head gets
the ImageNet class names (tools/imagenet_classes.txt), so `eval --image` prints them.

    tools/convert_pth.py agent_swin_t.pth agent_swin_t.safetensors --model agent_swin_t
    tools/convert_pth.py cswin.pth out.safetensors --model agent_cswin_t --ema
    tools/convert_pth.py my.pth out.safetensors --config configs/tiny/swin_agent.json

Needs no PyTorch: both of torch.save's formats (the zip archive, and the older single pickle stream)
are read here. The official repos pickle more than weights beside them (their yacs config, argparse
namespaces); unpickling never imports or runs such classes: every class but the few that rebuild
tensors and dictionaries becomes an inert stand-in, and the weights are all that is kept.
"""
import argparse
import array
import collections
import json
import os
import pickle
import struct
import sys
import zipfile

BUFFERS = ("relative_position_index", "attn_mask", "relative_coords_table")
CLASSES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "imagenet_classes.txt")

# storage dtypes: name -> (struct/array code, bytes per element)
DTYPES = {
    "float32": ("f", 4), "float64": ("d", 8), "float16": ("e", 2), "bfloat16": ("bf16", 2),
    "int64": ("q", 8), "int32": ("i", 4), "int16": ("h", 2), "int8": ("b", 1), "uint8": ("B", 1),
    "bool": ("?", 1),
}
STORAGE_DTYPES = {  # the typed storage classes torch pickles
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
}


class ConvertError(Exception):
    pass


class Stand_in:
    """Whatever a checkpoint pickles that is not a tensor or a dict (a yacs CfgNode, a Namespace,
    a numpy scalar): accepts any construction and state, and means nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    # dict subclasses (yacs's CfgNode) are rebuilt through these
    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass


class Storage:
    def __init__(self, dtype, data):
        self.dtype, self.data = dtype, data  # data: bytes (None until the legacy format's tail is read)


class Tensor:
    def __init__(self, storage, offset, shape, stride):
        self.storage, self.offset, self.shape, self.stride = storage, offset, tuple(shape), tuple(stride)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def float32(self):
        """The values as contiguous little-endian float32 bytes."""
        values = decode(self.storage)
        n = self.numel()
        contiguous, expect = True, 1
        for d, s in zip(reversed(self.shape), reversed(self.stride)):
            if d != 1 and s != expect:
                contiguous = False
            expect *= d
        if contiguous:
            picked = values[self.offset:self.offset + n]
        else:
            index = [self.offset]
            for d, s in zip(self.shape, self.stride):
                index = [i + k * s for i in index for k in range(d)]
            picked = [values[i] for i in index]
        if len(picked) != n:
            raise ConvertError(f"a tensor of shape {list(self.shape)} reaches past its storage")
        out = array.array("f", picked)
        if sys.byteorder != "little":
            out.byteswap()
        return out.tobytes()


def decode(storage):
    """The storage's elements as a sequence of Python numbers (float32 as an array, no copy)."""
    code, size = DTYPES[storage.dtype]
    data = storage.data
    n = len(data) // size
    if code == "f":
        values = array.array("f")
        values.frombytes(data[:n * 4])
        if sys.byteorder != "little":
            values.byteswap()
        return values
    if code == "bf16":  # the high half of a float32
        halves = struct.unpack(f"<{n}H", data[:n * 2])
        return array.array("f", struct.pack(f"<{n}I", *(h << 16 for h in halves)))
    return struct.unpack(f"<{n}{code}", data[:n * size])


def rebuild_tensor(storage, offset, shape, stride, *unused):
    return Tensor(storage, offset, shape, stride)


def rebuild_parameter(data, *unused):
    return data


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves torch's tensor rebuilders, storage types and dtypes to the classes above, ordered
    dicts to themselves, and every other global to Stand_in: no foreign code is imported."""

    def __init__(self, file, storages):
        super().__init__(file)
        self.storages = storages  # key -> Storage, filled by persistent_load

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return rebuild_parameter
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module == "torch" and name in STORAGE_DTYPES:
            return STORAGE_DTYPES[name]
        if module == "torch" and name in DTYPES:  # torch.float32 etc. (untyped storages)
            return name
        return Stand_in

    def persistent_load(self, pid):
        # ('storage', storage type or dtype, key, location, numel[, view metadata])
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise ConvertError(f"unexpected persistent id {pid!r}")
        dtype, key = pid[1], str(pid[2])
        if dtype not in DTYPES:
            raise ConvertError(f"storage of unsupported type {dtype!r}")
        if key not in self.storages:
            self.storages[key] = Storage(dtype, None)
        return self.storages[key]


def load_zip(path):
    with zipfile.ZipFile(path) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise ConvertError("a zip archive without data.pkl")
        prefix = pkl[0][:-len("data.pkl")]
        storages = {}
        with z.open(pkl[0]) as f:
            obj = RestrictedUnpickler(f, storages).load()
        for key, s in storages.items():
            s.data = z.read(f"{prefix}data/{key}")
    return obj


LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def load_legacy(path):
    """torch.save(..., _use_new_zipfile_serialization=False): pickles of the magic number, the
    protocol version and system info, the object, the storage keys, then each storage's element
    count (8 bytes, little-endian) and raw data."""
    with open(path, "rb") as f:
        if pickle.Unpickler(f).load() != LEGACY_MAGIC:
            raise ConvertError("neither a zip archive nor torch's legacy format")
        pickle.Unpickler(f).load()  # protocol version
        pickle.Unpickler(f).load()  # system info
        storages = {}
        obj = RestrictedUnpickler(f, storages).load()
        keys = pickle.Unpickler(f).load()
        for key in keys:
            s = storages[str(key)]
            (numel,) = struct.unpack("<q", f.read(8))
            s.data = f.read(numel * DTYPES[s.dtype][1])
    return obj


def load(path):
    if not os.path.isfile(path):
        raise ConvertError("no such file")
    try:
        return load_zip(path) if zipfile.is_zipfile(path) else load_legacy(path)
    except ConvertError:
        raise
    except (pickle.UnpicklingError, EOFError, KeyError, ValueError, struct.error, IndexError) as e:
        raise ConvertError(f"not a readable PyTorch checkpoint ({type(e).__name__}: {e})")


def state_dict_of(obj, ema):
    if isinstance(obj, dict) and ema:
        if "state_dict_ema" not in obj:
            raise ConvertError("--ema given but the checkpoint has no 'state_dict_ema'")
        return obj["state_dict_ema"]
    if isinstance(obj, dict):
        for key in ("model", "state_dict"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key]
    return obj


def save_safetensors(path, tensors, metadata):
    header, offset = {"__metadata__": metadata}, 0
    for name, (shape, data) in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, data in tensors.values():
            f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pth")
    ap.add_argument("out")
    ap.add_argument("--model", help="a vitc registry name (e.g. agent_swin_t)")
    ap.add_argument("--config", help="a vitc config JSON whose model section describes the network")
    ap.add_argument("--ema", action="store_true", help="convert the EMA weights (state_dict_ema)")
    ap.add_argument("--classes", help="class names, one per line (default: ImageNet's for 1000 classes)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra model keys, e.g. --set num_classes=10")
    args = ap.parse_args()
    if not args.model and not args.config:
        ap.error("give --model NAME or --config FILE")
    try:
        sd = state_dict_of(load(args.pth), args.ema)
        if not isinstance(sd, dict) or not any(isinstance(v, Tensor) for v in sd.values()):
            raise ConvertError("holds no state_dict (no tensors under 'model', 'state_dict' or at the top)")
        tensors = {}
        for name, value in sd.items():
            name = name[len("module."):] if name.startswith("module.") else name
            if name.endswith(BUFFERS) or not isinstance(value, Tensor):
                continue
            tensors[name] = (value.shape, value.float32())
    except ConvertError as e:
        sys.exit(f"error: {args.pth}: {e}")
    model = {}
    if args.config:
        with open(args.config) as f:
            model = json.load(f)["model"]
    if args.model:
        model["name"] = args.model
    if "head.weight" in tensors and "num_classes" not in model:
        model["num_classes"] = int(tensors["head.weight"][0][0])
    for kv in args.set:
        key, _, value = kv.partition("=")
        try:
            model[key] = json.loads(value)
        except json.JSONDecodeError:
            model[key] = value
    metadata = {"format": "vitc-checkpoint-1", "config": json.dumps({"model": model}),
                "source": os.path.basename(args.pth)}
    classes = args.classes or (CLASSES_FILE if model.get("num_classes") == 1000 else None)
    if classes:
        with open(classes) as f:
            names = [line.strip() for line in f if line.strip()]
        if names and len(names) != model.get("num_classes"):
            sys.exit(f"error: {classes}: {len(names)} names for {model.get('num_classes')} classes")
        metadata["classes"] = json.dumps(names)
    save_safetensors(args.out, tensors, metadata)
    print(f"wrote {args.out}: {len(tensors)} tensors, model {json.dumps(model)}")


if __name__ == "__main__":
    main()
