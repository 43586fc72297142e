"""Part directories written to S3 by a cluster, against moto's S3 server running in this process
(optional: skipped without moto, which the test extras leave out; ``pip install "moto[server]"``
to run it).  S3 is the object store the obj:// tests of test_cluster_urls.py imitate: keys under a
prefix, no directory to rename.  The scheme s3t:// names the server's S3 filesystem on the driver
and on every worker.  The oracle is the single-machine command's output on the local disk, read
by pyarrow as the S3 directory is."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from test_urls import run, table

import sptool
from sptool.io import register_filesystem

moto_server = pytest.importorskip("moto.server")
distributed = pytest.importorskip("distributed")
if not hasattr(pafs, "S3FileSystem"):
    pytest.skip("this pyarrow has no S3 support", allow_module_level=True)

SHAPE = (40, 30, 20)


@pytest.fixture(scope="module")
def s3():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    fs = pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http", access_key="testing",
                           secret_key="testing", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir("bucket")
    yield fs
    server.stop()


@pytest.fixture
def bucket(s3, cluster_client, monkeypatch):
    """s3t://bucket/... on the driver and every worker; the bucket emptied afterwards."""
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "150")
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "97")
    register_filesystem("s3t", s3)
    cluster_client.run(register_filesystem, "s3t", s3)
    yield s3
    cluster_client.run(register_filesystem, "s3t", None)
    register_filesystem("s3t", None)
    s3.delete_dir_contents("bucket")


def keys(s3) -> list[str]:
    return sorted(i.path for i in s3.get_file_info(pafs.FileSelector("bucket", recursive=True))
                  if i.type == pafs.FileType.File)


def s3_table(s3, prefix: str):
    """A directory's parts in name order, as pyarrow reads them from S3."""
    names = sorted(k for k in keys(s3) if k.startswith(prefix + "/") and "/" not in k[len(prefix) + 1:]
                   and k.endswith(".parquet") and not os.path.basename(k).startswith((".", "_")))
    return pa.concat_tables([pq.read_table(k, filesystem=s3) for k in names])


def same_tensor(s3, prefix, plain):
    assert s3_table(s3, prefix).equals(table(plain))


@pytest.fixture
def operands(tmp_path, rng):
    made = {}
    for name in ("a", "b"):
        idx = np.stack([rng.integers(0, d, 1500) for d in SHAPE], axis=1)
        idx[700:] = idx[rng.integers(0, 700, 800)]  # duplicates
        folder = tmp_path / name
        folder.mkdir()
        for i, (k, v) in enumerate(zip(np.array_split(idx, 3), np.array_split(rng.standard_normal(1500), 3))):
            sptool.write(sptool.SparseTensor(k, v, SHAPE), str(folder / f"part-{i:06d}.parquet"))
        made[name] = str(folder) + "/"
    return made


@pytest.mark.parametrize("command", [["reorder", "A", "--perm", "2,0,1"], ["add", "A", "B"],
                                     ["reduce", "A", "--op", "sum", "--axis", "1"]])
def test_cluster_output_on_s3_equals_one_machine(cluster_client, bucket, operands, tmp_path, command):
    args = [operands[a.lower()] if a in ("A", "B") else a for a in command]
    run(*args, "-o", str(tmp_path / "plain.parquet"))
    run("--scheduler", cluster_client.scheduler.address, *args, "-o", "s3t://bucket/out/")
    same_tensor(bucket, "bucket/out", tmp_path / "plain.parquet")
    assert all(k.startswith("bucket/out/part-") for k in keys(bucket)), keys(bucket)


def test_cluster_split_replaces_its_outputs_on_s3(cluster_client, bucket, operands, tmp_path):
    """Several directories committed together, over the outputs of an earlier job."""
    scheduler = ["--scheduler", cluster_client.scheduler.address]
    run(*scheduler, "split", operands["b"], "--axis", "0", "--num-split", "2", "-o", "s3t://bucket/sp-{i}/")
    run(*scheduler, "split", operands["a"], "--axis", "1", "--num-split", "2", "-o", "s3t://bucket/sp-{i}/")
    run("split", operands["a"], "--axis", "1", "--num-split", "2", "-o", str(tmp_path / "plain-{i}.parquet"))
    for i in range(2):
        same_tensor(bucket, f"bucket/sp-{i}", tmp_path / f"plain-{i}.parquet")
    assert all(k.startswith(("bucket/sp-0/part-", "bucket/sp-1/part-")) for k in keys(bucket)), keys(bucket)


def test_a_failed_cluster_job_leaves_nothing_on_s3(cluster_client, bucket, operands, tmp_path):
    path = os.path.join(operands["a"], "part-000001.parquet")
    file = pq.ParquetFile(path)
    t = file.read()
    col = t.column("indices_0").to_numpy().copy()
    col[3] = SHAPE[0]  # outside the shape
    meta = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    pq.write_table(t.set_column(0, "indices_0", pa.array(col)).replace_schema_metadata(meta), path)
    res = run("--scheduler", cluster_client.scheduler.address, "reorder", operands["a"], "-o", "s3t://bucket/out/",
              code=1)
    assert "out of bounds" in res.output and res.output.count("\n") == 1
    assert keys(bucket) == []


def test_one_machine_directory_output_on_s3(bucket, operands, tmp_path):
    """The single machine's directory output is committed the same way (io.commit_all)."""
    run("reorder", operands["a"], "--duplicates", "sum", "-o", str(tmp_path / "plain.parquet"))
    run("reorder", operands["a"], "--duplicates", "sum", "-o", "s3t://bucket/one/")
    run("reorder", operands["a"], "--duplicates", "sum", "-o", "s3t://bucket/one/")  # replaced
    same_tensor(bucket, "bucket/one", tmp_path / "plain.parquet")
    assert all(k.startswith("bucket/one/part-") for k in keys(bucket)), keys(bucket)
