"""Names for dct.h's enums, and the datatypes of torch and numpy buffers."""
ALGORITHMS = {"auto": 0, "allgather": 1, "dense": 2, "split": 3, "globaltopk": 4,
              "recursivedoubling": 5}
COMPRESSORS = {"topk": 0, "onebit": 1}
THRESHOLD_METHODS = {"sampled": 0, "exact": 1, "bisect": 2}
ROW_SELECTIONS = {"topk": 0, "threshold": 1}
DATATYPES = {"fp32": 0, "fp64": 1, "fp16": 2, "bf16": 3}
DATATYPE_NAMES = {v: k for k, v in DATATYPES.items()}
ALGORITHM_NAMES = {v: k for k, v in ALGORITHMS.items()}
ALGORITHM_NAMES[6] = "onebit"  # dctNumAlgorithms: a 1-bit step
OPS = {"sum": 0, "avg": 1}
ELEMENT_BYTES = {0: 4, 1: 8, 2: 2, 3: 2}


def enum_value(table, value, what):
    """A dct.h enum from its name (or its number)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return table[str(value).lower()]
    except KeyError:
        raise ValueError(f"{what} must be one of {sorted(table)}, not {value!r}") from None


def datatype_of(buf):
    """dctDataType_t of a torch tensor or numpy array."""
    name = str(buf.dtype).replace("torch.", "")
    table = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
    if name not in table:
        raise TypeError(f"libdct reduces float32, float64, float16 and bfloat16 buffers, not {buf.dtype}")
    return table[name]


def datatype_from(value):
    """dctDataType_t from a name ("fp16"), a torch dtype or a number."""
    if value is None or isinstance(value, int):
        return value
    text = str(value).replace("torch.", "")
    text = {"float32": "fp32", "float64": "fp64", "float16": "fp16", "half": "fp16",
            "bfloat16": "bf16"}.get(text, text)
    return enum_value(DATATYPES, text, "wire_type")
