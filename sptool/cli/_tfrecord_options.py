"""The options of `sptool convert` for TFRecord files of tf.train.Example records, as one bundle
(--ids and --values also name JSON lines keys)."""

from __future__ import annotations

import click

from ._vocabulary import option


def tfrecord_options(fn):
    """--ids, --values, --feature and --compression (--labels, --label-key and --vocab-size are
    shared with svmlight and JSON lines, in convert.py)."""
    for decorator in reversed((
        option("ids", metavar="NAME", default=None, help="TFRecord feature or JSON key of ids."),
        option("values", metavar="NAME", default=None, help="TFRecord feature or JSON key of values."),
        option("feature", metavar="FEATURE", default=None, hidden=True,
               help="TFRecord input: one feature by position."),
        option("compression", type=click.Choice(["none", "gzip", "zlib"], case_sensitive=False),
               default=None, hidden=True, help="TFRecord compression [default: by name/bytes]."),
    )):
        fn = decorator(fn)
    return fn
