#!/usr/bin/env python3
"""Converts a PyTorch checkpoint with the official key names (an Agent-Attention / FLatten / Swin /
PVT / CSwin / DeiT release, or a state_dict saved from tools/ref) into a .safetensors file that
`eval --ckpt` loads: float32 tensors under the same names, buffers vitc recomputes dropped
(relative_position_index, attn_mask), and the model config in the header. A 1000-class head gets
the ImageNet class names (tools/imagenet_classes.txt), so `eval --image` prints them; `--classes FILE`
(one name a line) names another head's. `--ema` takes the EMA weights (timm's 'state_dict_ema',
DeiT's 'model_ema', DiT's and SiT's 'ema') instead of 'model' / 'state_dict'.

    tools/convert_pth.py agent_swin_t.pth agent_swin_t.safetensors --model agent_swin_t
    tools/convert_pth.py cswin.pth out.safetensors --model agent_cswin_t --ema
    tools/convert_pth.py my.pth out.safetensors --config configs/tiny/swin_agent.json

Needs no PyTorch: both of torch.save's formats (the zip archive, and the older single pickle stream)
are read here. The official repos pickle more than weights beside them (their yacs config, argparse
namespaces); unpickling never imports or runs such classes: every class but the few that rebuild
tensors and dictionaries becomes an inert stand-in, and the weights are all that is kept.
Tensors may be views (any strides and offset) of float32/16, bfloat16, float64, integer or bool
storages; each is written as contiguous float32, one at a time (an 88M-parameter checkpoint: ~3 s).
"""
import argparse
import array
import collections
import itertools
import json
import os
import pickle
import struct
import sys
import zipfile

BUFFERS = ("relative_position_index", "attn_mask", "relative_coords_table")
CLASSES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "imagenet_classes.txt")

# storage dtypes: name -> (struct code, bytes per element)
DTYPES = {
    "float32": ("f", 4), "float64": ("d", 8), "float16": ("e", 2), "bfloat16": ("bf16", 2),
    "int64": ("q", 8), "int32": ("i", 4), "int16": ("h", 2), "int8": ("b", 1), "uint8": ("B", 1),
    "bool": ("?", 1),
}
STORAGE_DTYPES = {  # the typed storage classes torch pickles; an untyped storage holds bytes
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "UntypedStorage": "uint8",
}
# storages no model weight uses (an optimizer's complex state, quantized tensors): the legacy format
# needs their element sizes to find the storages after them
OTHER_SIZES = {"ComplexFloatStorage": 8, "ComplexDoubleStorage": 16, "QInt8Storage": 1, "QUInt8Storage": 1,
               "QInt32Storage": 4, "QUInt4x2Storage": 1, "QUInt2x4Storage": 1}


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
    def __init__(self, dtype):
        self.dtype = dtype  # a DTYPES name, or the pickled type's name when it is none of those
        self.data = None  # little-endian bytes, filled once the archive's storages are read


class View:
    """The legacy format's storage view (torch < 0.4): elements [start, ...) of another storage."""

    def __init__(self, base, start):
        self.base, self.start = base, start


class Tensor:
    def __init__(self, storage, offset, shape, stride):
        if isinstance(storage, View):
            storage, offset = storage.base, storage.start + offset
        self.storage, self.offset, self.shape, self.stride = storage, offset, tuple(shape), tuple(stride)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def float32(self):
        """The values as contiguous little-endian float32 bytes, in row-major order."""
        if self.numel() == 0:
            return b""
        dims = [(d, s) for d, s in zip(self.shape, self.stride) if d != 1]  # size-1 dims move nothing
        # decode only the elements the view reaches: storages can be shared, and much larger
        values = decode(self.storage, self.offset, 1 + sum((d - 1) * s for d, s in dims))
        row_major, expect = True, 1
        for d, s in reversed(dims):
            row_major, expect = row_major and s == expect, expect * d
        if row_major:
            out = values
        else:  # a transposed or sliced view: gather it one innermost row (one strided slice) at a time
            *outer, (d, s) = dims
            out = array.array("f")
            for index in itertools.product(*(range(od) for od, _ in outer)):
                at = sum(i * step for i, (_, step) in zip(index, outer))
                out.extend(values[at:at + (d - 1) * s + 1:s] if s else array.array("f", [values[at]]) * d)
        if sys.byteorder != "little":
            out.byteswap()
        return out.tobytes()


def decode(storage, start, count):
    """Elements [start, start + count) of the storage as an array of float32."""
    if storage.dtype not in DTYPES:
        raise ConvertError(f"a tensor of unsupported type {storage.dtype}")
    code, size = DTYPES[storage.dtype]
    data = bytes(memoryview(storage.data)[start * size:(start + count) * size])
    if len(data) != count * size:
        raise ConvertError("a tensor reaches past its storage")
    if code == "bf16":  # the high half of a float32: put two zero bytes below each (little-endian)
        wide = bytearray(4 * count)
        wide[2::4], wide[3::4] = data[0::2], data[1::2]
        code, data = "f", wide
    if code in "fd":  # C speed; float64 rounds to the nearest float32 as torch's .float() does
        values = array.array(code)
        values.frombytes(data)
        if sys.byteorder != "little":
            values.byteswap()
        return values if code == "f" else array.array("f", values)
    return array.array("f", struct.unpack(f"<{count}{code}", data))


def little_endian(data, size):
    """A big-endian archive's storage bytes, each element of `size` bytes reversed."""
    if size == 1:
        return data
    words = array.array({2: "H", 4: "I", 8: "Q"}[size])
    words.frombytes(data)
    words.byteswap()
    return words.tobytes()


def rebuild_tensor(storage, offset, shape, stride, *unused):
    return Tensor(storage, offset, shape, stride)


def rebuild_parameter(data, *unused):
    return data


def rebuild_from_type(func, new_type, args, state):
    """torch >= 2 wraps tensors that carry attributes (and subclasses) in this: the tensor is in args"""
    return func(*args)


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves torch's tensor rebuilders, storage types and dtypes to the code above, ordered
    dicts to themselves, and every other global to Stand_in: no foreign code is imported."""

    def __init__(self, file, storages):
        super().__init__(file)
        self.storages = storages  # key -> Storage, filled by persistent_load

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return rebuild_parameter
        if module == "torch._tensor" and name == "_rebuild_from_type_v2":
            return rebuild_from_type
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("torch", "torch.storage") and name.endswith("Storage"):
            return STORAGE_DTYPES.get(name, name)
        if module == "torch" and name in DTYPES:  # torch.float32 etc. (untyped storages)
            return name
        return Stand_in

    def persistent_load(self, pid):
        # ('storage', storage type or dtype, key, location, numel[, view metadata])
        if not isinstance(pid, tuple) or len(pid) < 5 or pid[0] != "storage":
            raise ConvertError(f"unexpected persistent id {pid!r}")
        key = str(pid[2])
        if key not in self.storages:
            self.storages[key] = Storage(pid[1] if isinstance(pid[1], str) else "unknown")
        view = pid[5] if len(pid) > 5 else None
        if view is not None:  # (view key, offset, size)
            return View(self.storages[key], view[1])
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
        # torch >= 2.1 records the writer's byte order; older archives are little-endian
        big = f"{prefix}byteorder" in z.namelist() and z.read(f"{prefix}byteorder").strip() == b"big"
        for key, s in storages.items():
            s.data = z.read(f"{prefix}data/{key}")
            if big and s.dtype in DTYPES:
                s.data = little_endian(s.data, DTYPES[s.dtype][1])
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
            size = DTYPES[s.dtype][1] if s.dtype in DTYPES else OTHER_SIZES.get(s.dtype)
            if size is None:  # the storages after this one cannot be found
                raise ConvertError(f"a storage of unknown type {s.dtype}")
            count = f.read(8)
            nbytes = struct.unpack("<q", count)[0] * size if len(count) == 8 else -1
            s.data = f.read(max(nbytes, 0))
            if len(s.data) != nbytes:
                raise ConvertError("truncated: the file ends inside its tensor data")
    return obj


def load(path):
    if not os.path.isfile(path):
        raise ConvertError("no such file" if not os.path.exists(path) else "not a file")
    try:
        if zipfile.is_zipfile(path):
            return load_zip(path)
        with open(path, "rb") as f:
            if f.read(4) == b"PK\x03\x04":  # a zip's first entry, but no readable directory at its end
                raise ConvertError("a zip archive that cannot be read (truncated or damaged?)")
        return load_legacy(path)
    except ConvertError:
        raise
    except OSError as e:
        raise ConvertError(e.strerror or str(e))
    except Exception as e:  # any other failure of the bytes to parse (pickle, zip, struct, ...)
        raise ConvertError(f"not a readable PyTorch checkpoint ({type(e).__name__}: {e})")


def state_dict_of(obj, ema):
    if isinstance(obj, dict) and ema:
        # timm's train.py, DeiT's main.py, DiT's and SiT's train.py
        for key in ("state_dict_ema", "model_ema", "ema"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key]
        raise ConvertError("--ema given but the checkpoint has no 'state_dict_ema' (nor 'model_ema', nor 'ema')")
    if isinstance(obj, dict):
        for key in ("model", "state_dict"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key]
    return obj


def save_safetensors(path, tensors, metadata):
    """tensors: name -> Tensor, written one at a time as float32 so only one is in memory."""
    header, offset = {"__metadata__": metadata}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + 4 * t.numel()]}
        offset += 4 * t.numel()
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for name, t in tensors.items():
                try:
                    f.write(t.float32())
                except ConvertError as e:
                    raise ConvertError(f"{name}: {e}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pth")
    ap.add_argument("out")
    ap.add_argument("--model", help="a vitc registry name (e.g. agent_swin_t)")
    ap.add_argument("--config", help="a vitc config JSON whose model section describes the network")
    ap.add_argument("--ema", action="store_true", help="convert the EMA weights (state_dict_ema, model_ema or ema)")
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
    except ConvertError as e:
        sys.exit(f"error: {args.pth}: {e}")
    tensors = {}
    for name, value in sd.items():
        name = name[len("module."):] if name.startswith("module.") else name
        if isinstance(value, Tensor) and not name.endswith(BUFFERS):
            tensors[name] = value
    model = {}
    if args.config:
        try:
            with open(args.config) as f:
                model = json.load(f)["model"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"error: {args.config}: not a config with a model section ({type(e).__name__}: {e})")
    if args.model:
        model["name"] = args.model
    if "head.weight" in tensors and "num_classes" not in model:
        model["num_classes"] = tensors["head.weight"].shape[0]
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
        try:
            with open(classes) as f:
                names = [line.strip() for line in f if line.strip()]
        except OSError as e:
            sys.exit(f"error: {classes}: {e.strerror or e}")
        if names and len(names) != model.get("num_classes"):
            sys.exit(f"error: {classes}: {len(names)} names for {model.get('num_classes')} classes")
        metadata["classes"] = json.dumps(names)
    try:
        save_safetensors(args.out, tensors, metadata)
    except ConvertError as e:
        sys.exit(f"error: {args.pth}: {e}")
    except OSError as e:
        sys.exit(f"error: {args.out}: {e.strerror or e}")
    print(f"wrote {args.out}: {len(tensors)} tensors, model {json.dumps(model)}")


if __name__ == "__main__":
    main()
