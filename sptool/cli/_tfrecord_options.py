"""The options of `sptool convert` for TFRecord files of tf.train.Example records, as one bundle
(--ids and --values also name JSON lines keys)."""

from __future__ import annotations

import click

from ._vocabulary import option


def tfrecord_options(fn):
    """--ids, --values, --feature and --compression (--labels, --label-key and --vocab-size are
    shared with svmlight and JSON lines, in convert.py)."""
    for decorator in reversed((
        option("ids", metavar="NAME", default=None,
               help="TFRecord input: the int64 feature of ids, giving TensorFlow's sparse_merge "
               "[n_examples, --vocab-size] tensor. TFRecord output: the feature name of each row's column "
               "numbers. JSON lines: the key of each line's ids [default: ids]."),
        option("values", metavar="NAME", default=None,
               help="TFRecord: the feature of the values, one per id [default for input: every id gets 1 "
               "(float32); for output: values not written, so they must all be 1]. JSON lines: the key of "
               "each line's values [default: values]."),
        option("feature", metavar="FEATURE", default=None,
               help="TFRecord input: one feature's values by position, TensorFlow's VarLenFeature view "
               "[n_examples, max_len] (int64, float32, or bytes as binary)."),
        option("compression", type=click.Choice(["none", "gzip", "zlib"], case_sensitive=False),
               default=None,
               help="TFRecord compression [default: GZIP for names ending .gz; for input, told from the "
               "first bytes (GZIP or ZLIB)]."),
    )):
        fn = decorator(fn)
    return fn
