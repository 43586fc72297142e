"""sptool's vocabulary: one name for each concept, shared by every command's options and every
public function's keywords.

Each ``Word`` is a concept: ``name`` is its Python keyword (and Click's parameter name),
``flags`` its option spellings on the command line, ``means`` what it names.  Spellings that an
older sptool used are kept working, hidden, where it used them: ``old_flags`` maps a command to
its old spellings (a one-line warning once per process), ``old_keywords`` a public function to
its old keywords (a DeprecationWarning).  A command
declares its options from here (``sptool.cli._vocabulary.option``), and tests/test_vocabulary.py
checks that no spelling names two concepts and no concept has two spellings.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    name: str
    flags: tuple[str, ...]
    means: str
    old_flags: dict[str, tuple[str, ...]]
    old_keywords: dict[str, tuple[str, ...]]


def _word(name, flags, means, old_flags=None, old_keywords=None) -> Word:
    flags = (flags,) if isinstance(flags, str) else tuple(flags)
    return Word(name, flags, means, dict(old_flags or {}), dict(old_keywords or {}))


_WORDS = [
    # Every command: where the result goes, and how the command runs.
    _word("output", ("-o", "--output"), "where the result goes: a path, a directory (ending in /) or - for "
          "stdout; in the API, None returns the result", old_keywords={"convert": ("dst",), "split": ("pattern",)}),
    _word("memory", ("-m", "--memory"), "the memory budget for the data"),
    _word("quiet", ("-q", "--quiet"), "no progress bars or summary lines"),
    _word("debug", "--debug", "a traceback on errors"),
    _word("json_summary", "--json-summary", "what happened, as one JSON object"),
    _word("scheduler", "--scheduler", "the Dask cluster the command runs on"),
    _word("version", ("-V", "--version"), "the version"),
    _word("help_all", "--help-all", "every command's help on one page"),
    _word("tmp_dir", "--tmp-dir", "where sorted runs are spilled"),
    _word("as_json", "--json", "print the result as JSON"),
    # Reading and checking.
    _word("scan", "--scan", "read the index columns for exact ranges"),
    _word("histogram", "--histogram", "the distribution of stored entries per index of an axis"),
    _word("metadata_only", "--metadata-only", "check metadata only, read no data"),
    _word("deep", "--deep", "also check what costs a sort"),
    _word("strict", "--strict", "refuse what is otherwise tolerated"),
    _word("count", ("-n", "--count"), "how many stored entries to show", old_flags={"head": ("--rows",)},
          old_keywords={"head": ("n",)}),
    # The tensor's structure.
    _word("shape", "--shape", "the output's shape"),
    _word("dtype", "--dtype", "the value type of the output, as NumPy names it",
          old_flags={"convert": ("--value-type",)},
          old_keywords={"convert": ("value_type",)}),
    _word("fill_value", "--fill-value", "the output's fill value"),
    _word("default_value", "--default-value", "the value where nothing is stored (TensorFlow's default_value)",
          old_flags={"fill-empty-rows": ("--value",)},
          old_keywords={"fill_empty_rows": ("value",)}),
    _word("empty_value", "--empty-value", "a reduction's result where no stored entry reaches"),
    _word("axis", "--axis", "an axis (or axes) to work along; negative values count from the end",
          old_flags={"spy": ("--axes",)}, old_keywords={"spy": ("axes",)}),
    _word("perm", "--perm", "a permutation of the sparse dimensions (TensorFlow's perm)",
          old_flags={"reorder": ("--order",)},
          old_keywords={"reorder": ("order",)}),
    _word("num_split", "--num-split", "the number of pieces (TensorFlow's num_split)",
          old_flags={"split": ("--num", "-n")},
          old_keywords={"split": ("num",)}),
    _word("start", "--start", "the first index of a box in each dimension"),
    _word("size", "--size", "the extent of a box in each dimension"),
    _word("keepdims", "--keepdims", "keep reduced axes with extent 1"),
    _word("expand_nonconcat", "--expand-nonconcat", "let the other dimensions differ"),
    _word("vocab_size", "--vocab-size", "the extent of the id dimension: ids lie in [0, V) (TensorFlow's "
          "vocab_size, scikit-learn's n_features)", old_flags={"convert": ("--n-features",)},
          old_keywords={"convert": ("n_features",)}),
    _word("duplicates", "--duplicates", "what becomes of rows sharing a coordinate"),
    # Formats (convert).
    _word("from_format", "--from", "the input's format"),
    _word("to_format", "--to", "the output's format"),
    _word("index_base", "--index-base", "the index base of text formats"),
    _word("zero_based", "--zero-based/--one-based", "whether svmlight ids start at 0"),
    _word("labels", "--labels", "a file of one label per example"),
    _word("multilabel", "--multilabel", "svmlight label lists"),
    _word("query_id", "--query-id", "a file of svmlight qid values"),
    _word("ids", "--ids", "the name of each record's ids (a TFRecord feature, a JSON lines key)"),
    _word("values", "--values", "the name of each record's values (a TFRecord feature, a JSON lines key)"),
    _word("label_key", "--label-key", "the name of each record's label (a TFRecord feature, a JSON lines key)",
          old_flags={"convert": ("--label-feature",)},
          old_keywords={"convert": ("label_feature",)}),
    _word("feature", "--feature", "one TFRecord feature by position (TensorFlow's VarLenFeature)"),
    _word("compression", "--compression", "a TFRecord file's compression"),
    _word("index_columns", "--index-columns", "a plain table's index columns"),
    _word("values_column", "--values-column", "a plain table's values column"),
    _word("dense", "--dense", "Matrix Market's dense array format"),
    _word("plain", "--plain", "write a plain table, without tensor metadata"),
    _word("dimension_names", "--dimension-names", "the names of the index columns"),
    _word("row_ids", "--row-ids", "a .npy of a row-sparse tensor's row ids", old_flags={"convert": ("--rows",)},
          old_keywords={"convert": ("rows",)}),
    _word("row_values", "--row-values", "a .npy of a row-sparse tensor's dense rows, one per row id"),
    _word("height", "--height", "a row-sparse tensor's first extent"),
    _word("key", "--key", "the matrix of an AnnData input"),
    # One command's own words.
    _word("validate", "--validate/--no-validate", "also check the input's order claims"),
    _word("mask", "--mask", "a bool .npy of one flag per row"),
    _word("where", "--where", "an expression rows must satisfy"),
    _word("indicator", "--indicator", "a bool .npy of the rows that were empty"),
    _word("op", "--op", "the reduction"),
    _word("thresh", "--thresh", "TensorFlow's add threshold"),
    _word("prune", "--prune", "apply --thresh to every entry"),
    _word("scalar", "--scalar", "a number added to every stored entry"),
    _word("adjoint_a", "--adjoint-a", "the conjugate transpose of A"),
    _word("adjoint_b", "--adjoint-b", "the conjugate transpose of B"),
    _word("fn", "--fn", "the function applied to every value"),
    _word("allow_fill_change", "--allow-fill-change", "accept a function that changes the fill value"),
    _word("ascii_", "--ascii", "draw as text"),
    _word("image_size", "--image-size", "the size of a picture: pixels, or characters of text",
          old_flags={"spy": ("--size",)}, old_keywords={"spy": ("size",)}),
    _word("separator", "--separator", "the text between crossed features"),
    _word("num_buckets", "--num-buckets", "the number of hash buckets (TensorFlow's num_buckets)"),
    _word("hash_key", "--hash-key", "the key a hash chain starts from"),
    _word("weights", "--weights", "a tensor of weights, one per value"),
    _word("minlength", "--minlength", "the least number of bins"),
    _word("maxlength", "--maxlength", "the number of bins, exactly"),
    _word("binary_output", "--binary-output", "1 for a value that occurs, instead of its count"),
    _word("indices", "--indices", "a .npy of row indices"),
    _word("segment_ids", "--segment-ids", "a .npy of sorted segment ids"),
    _word("num_segments", "--num-segments", "the number of output rows (TensorFlow's num_segments)"),
    _word("alpha", "--alpha", "the scale of a product"),
    _word("beta", "--beta", "the scale of the mask's values"),
    _word("optimizer", "--optimizer", "an update rule"),
    _word("lr", "--lr", "the learning rate"),
    _word("state", "--state", "the optimizer's state directory"),
    _word("initial_accumulator", "--initial-accumulator", "adagrad's starting accumulator"),
    _word("eps", "--eps", "added to a square root"),
    _word("beta1", "--beta1", "adam's decay of the first moment"),
    _word("beta2", "--beta2", "adam's decay of the second moment"),
    _word("recover", "--recover", "finish an interrupted apply"),
    _word("journal_limit", "--journal-limit", "the journal's size before a checkpoint"),
    _word("fsync", "--fsync/--no-fsync", "wait for the disk"),
]

VOCABULARY: dict[str, Word] = {w.name: w for w in _WORDS}


def word(name: str) -> Word:
    return VOCABULARY[name]


def renamed_keywords(*names: str):
    """A public function that still takes its old keywords of the concepts ``names`` (each with a
    DeprecationWarning naming the new one); passing both the old and the new is a TypeError."""

    def decorate(fn):
        params = inspect.signature(fn).parameters
        mine = {old: name for name in names for old in VOCABULARY[name].old_keywords.get(fn.__name__, ())}
        assert all(new in params and old not in params for old, new in mine.items()), (fn.__name__, mine)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old in set(kwargs) & set(mine):
                new = mine[old]
                if new in kwargs:
                    raise TypeError(f"{fn.__name__}() got both {new!r} and its old name {old!r}")
                warnings.warn(f"{fn.__name__}(): the keyword {old!r} is now {new!r}", DeprecationWarning,
                              stacklevel=2)
                kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        wrapper.old_keywords = dict(mine)
        return wrapper

    return decorate
