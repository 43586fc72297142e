"""`sptool validate` where CI lives: the pre-commit hook of .pre-commit-hooks.yaml, set up as
docs/ci.md says, stops a commit holding an invalid tensor and lets a valid one through; the
documented GitHub Actions step fails and passes on the same files.

Each test works in git repositories of its own under tmp_path, with pre-commit's cache there too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from command_examples import ROOT, env_with_sptool

yaml = pytest.importorskip("yaml")

SAMPLES = ROOT / "sample_data"
CI_PAGE = ROOT / "docs" / "ci.md"


def _env(tmp_path, tools=("git", "pre-commit")) -> dict:
    env = dict(env_with_sptool(), PRE_COMMIT_HOME=str(tmp_path / "pre-commit-cache"),
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    for tool in tools:
        if shutil.which(tool, path=env["PATH"]) is None:
            pytest.skip(f"{tool} is not installed (pre-commit: pip install -e '.[test]')")
    for who in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{who}_NAME"], env[f"GIT_{who}_EMAIL"] = "sptool tests", "tests@sptool.invalid"
    return env


def _git(repo, *args, env, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def _repository(path, files: dict, env):
    """A new git repository at path holding copies of files (name -> source path), not yet added."""
    path.mkdir()
    assert _git(path, "init", "-q", env=env).returncode == 0
    for name, source in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, path / name)
    return path


def _yaml_blocks() -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", CI_PAGE.read_text(), flags=re.S)


def _documented_config(url: str, rev: str, hook: str) -> str:
    (config,) = [block for block in _yaml_blocks() if block.startswith("repos:")]
    assert len(config.strip().splitlines()) == 4  # `repos:` and the three lines the page promises
    assert "id: sptool-validate}" in config
    return (config.replace("SPTOOL_GIT_URL", url).replace("SPTOOL_REV", rev)
            .replace("id: sptool-validate}", f"id: {hook}}}"))


def _hook_repository(tmp_path, env):
    """A hook repository holding the checkout's .pre-commit-hooks.yaml: all a `language: system`
    hook reads from its repository."""
    hooks = _repository(tmp_path / "hooks", {".pre-commit-hooks.yaml": ROOT / ".pre-commit-hooks.yaml"}, env)
    _git(hooks, "add", ".", env=env)
    assert _git(hooks, "commit", "-q", "-m", "hooks", env=env).returncode == 0
    return hooks, _git(hooks, "rev-parse", "HEAD", env=env).stdout.strip()


def _commit_gate(project, config: str, env, timeout=120):
    """pre-commit installed in project with config; a commit of an invalid and a valid tensor, then
    of the valid one alone (the first commit sets up the hook's environment: ``timeout``)."""
    (project / ".pre-commit-config.yaml").write_text(config)
    assert _git(project, "add", ".", env=env).returncode == 0
    p = subprocess.run(["pre-commit", "install"], cwd=project, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    both = _git(project, "commit", "-m", "tensors", env=env, timeout=timeout)
    _git(project, "rm", "-q", "--cached", "data/bad.parquet", env=env)
    good = _git(project, "commit", "-m", "the valid tensor", env=env)
    return both, good, _git(project, "ls-files", env=env).stdout.split()


def test_hook_stops_a_commit_with_an_invalid_tensor_and_passes_a_valid_one(tmp_path):
    env = _env(tmp_path)
    hooks, rev = _hook_repository(tmp_path, env)
    project = _repository(tmp_path / "project", {"data/good.parquet": SAMPLES / "tensor3d.parquet",
                                                 "data/bad.parquet": SAMPLES / "invalid.parquet"}, env)
    both, good, committed = _commit_gate(project, _documented_config(str(hooks), rev, "sptool-validate-system"), env)
    shown = both.stdout + both.stderr  # git shows its hooks' output on stderr
    assert both.returncode != 0, shown
    assert "data/bad.parquet: INVALID" in shown and "data/good.parquet: valid" in shown, shown
    assert good.returncode == 0, good.stdout + good.stderr
    assert sorted(committed) == [".pre-commit-config.yaml", "data/good.parquet"]


@pytest.mark.skipif(os.environ.get("SPTOOL_TEST_HOOK_BUILD") != "1",
                    reason="builds sptool in pre-commit's environment (about 10 minutes on 2 cores); "
                           "set SPTOOL_TEST_HOOK_BUILD=1 to run it")
def test_self_contained_hook_builds_sptool_and_gates_the_commit(tmp_path):
    """The `language: python` hook, from this checkout's committed HEAD as the hook repository."""
    env = _env(tmp_path)
    rev = _git(ROOT, "rev-parse", "HEAD", env=env)
    if rev.returncode != 0 or _git(ROOT, "cat-file", "-e", "HEAD:.pre-commit-hooks.yaml", env=env).returncode:
        pytest.skip("the checkout is not a git repository with .pre-commit-hooks.yaml committed")
    project = _repository(tmp_path / "project", {"data/good.parquet": SAMPLES / "tensor3d.parquet",
                                                 "data/bad.parquet": SAMPLES / "invalid.parquet"}, env)
    config = _documented_config(str(ROOT), rev.stdout.strip(), "sptool-validate")
    both, good, committed = _commit_gate(project, config, env, timeout=1800)
    assert both.returncode != 0 and "data/bad.parquet: INVALID" in both.stderr, both.stdout + both.stderr
    assert good.returncode == 0 and sorted(committed) == [".pre-commit-config.yaml", "data/good.parquet"]


def _workflow_step(name: str) -> str:
    (workflow,) = [yaml.safe_load(block) for block in _yaml_blocks() if block.startswith("name:")]
    (step,) = [s for job in workflow["jobs"].values() for s in job["steps"] if s.get("name") == name]
    return step["run"]


def test_github_actions_step_fails_on_an_invalid_tracked_tensor(tmp_path):
    """The documented step, run as GitHub runs a step's script (bash -e -o pipefail), in a checkout
    with a tensor in a subdirectory, an untracked invalid one, then a tracked invalid one."""
    env = _env(tmp_path, tools=("git",))
    script = _workflow_step("Validate tensors")
    project = _repository(tmp_path / "project", {"data/deep/good.parquet": SAMPLES / "tensor3d.parquet",
                                                 "bad.parquet": SAMPLES / "invalid.parquet"}, env)
    subprocess.run(["sptool", "convert", str(SAMPLES / "tensor3d.parquet"), "-o", "sorted.arrows", "-q"],
                   cwd=project, env=env, check=True)
    _git(project, "add", "data", "sorted.arrows", env=env)

    def step():
        return subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", script],
                              cwd=project, env=env, capture_output=True, text=True, timeout=120)

    clean = step()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "data/deep/good.parquet: valid" in clean.stdout and "sorted.arrows: valid" in clean.stdout
    assert "bad.parquet" not in clean.stdout  # untracked files are not the repository's
    _git(project, "add", "bad.parquet", env=env)
    failed = step()
    assert failed.returncode != 0 and "bad.parquet: INVALID" in failed.stdout, failed.stdout + failed.stderr
