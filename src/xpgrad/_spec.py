"""The names of the 2025.12 array API standard, by chapter: the source of truth for
the completeness tests and the generated differentiability table."""

from __future__ import annotations

API_VERSION = "2025.12"

CHAPTERS: dict[str, tuple[str, ...]] = {
    "creation": (
        "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
        "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    ),
    "data_type": ("astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"),
    "elementwise": (
        "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
        "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
        "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1",
        "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf",
        "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
        "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
        "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round",
        "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh", "trunc",
    ),
    "indexing": ("take", "take_along_axis"),
    "linear_algebra": ("matmul", "matrix_transpose", "tensordot", "vecdot"),
    "manipulation": (
        "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip",
        "moveaxis", "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    ),
    "searching": ("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where"),
    "set": ("isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"),
    "sorting": ("argsort", "sort"),
    "statistical": ("cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var"),
    "utility": ("all", "any", "diff"),
}

CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")

LINALG = (
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve",
    "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
)

FFT = (
    "fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft",
    "irfftn", "rfft", "rfftfreq", "rfftn",
)

FUNCTIONS: tuple[str, ...] = tuple(sorted({n for names in CHAPTERS.values() for n in names}))
