"""A configuration applied to the workload: the trial's spec and environment, the command
that reuses it, and the baseline's own point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalescope.bench.options import BenchOptions
from scalescope.launch.process.local import LaunchOptions
from scalescope.launch.run.runner import RunSpec
from scalescope.tune import knobs
from scalescope.tune.api import KNOBS_ENV
from scalescope.tune.apply import (
    TuneTarget,
    baseline_config,
    reuse_command,
    trial_setup,
    with_arg,
)
from scalescope.tune.space import SpaceContext, parse_space

SCRIPT = Path(__file__)
CTX = SpaceContext(nproc=2, cores=8)


def script_target(*args: str) -> TuneTarget:
    spec = RunSpec(target=str(SCRIPT), args=list(args), launch=LaunchOptions(nproc_per_node=2))
    return TuneTarget(spec)


def test_script_trial_gets_each_kind_of_knob_its_way(tmp_path: Path) -> None:
    space = parse_space(
        ["bucket_cap_mb=5,50", "workers=0,4", "threads_per_rank=1,2", "bind_to",
         "--lr=0.1,0.2", "PAUSE=1,2"],
        CTX,
    )  # fmt: skip
    config = {"bucket_cap_mb": 50.0, "workers": 4, "threads_per_rank": 2, "bind_to": "none",
              "--lr": 0.2, "PAUSE": 2}  # fmt: skip
    setup = trial_setup(script_target("--lr", "0.1", "--x"), space, config, tmp_path / "t")
    assert setup.spec.args == ["--lr=0.2", "--x"]
    assert setup.env["SCALESCOPE_DDP_BUCKET_CAP_MB"] == "50"
    assert setup.env["PAUSE"] == "2"
    assert json.loads(setup.env[KNOBS_ENV]) == {"workers": 4}
    assert setup.spec.mapping.threads_per_rank == 2 and setup.spec.mapping.bind is False
    assert setup.spec.run_dir == tmp_path / "t"
    assert setup.spec.options["tune"] == config


def test_bench_trial_uses_the_bench_options(tmp_path: Path) -> None:
    bench = BenchOptions(model="resnet18", batch_size=32, image_size=32, steps=20)
    spec = RunSpec(target="scalescope.bench.workload", is_module=True, args=bench.workload_args())
    target = TuneTarget(spec, bench)
    space = parse_space(["bucket_cap_mb=5,50", "channels_last", "comm_hook=none,bf16"], CTX)
    config = {"bucket_cap_mb": 5.0, "channels_last": True, "comm_hook": "bf16"}
    setup = trial_setup(target, space, config, tmp_path)
    assert "--bucket-cap-mb=5.0" in setup.spec.args and "--channels-last" in setup.spec.args
    assert setup.env == {"SCALESCOPE_DDP_COMM_HOOK": "bf16"}
    command = reuse_command(target, space, config)
    assert command.startswith("SCALESCOPE_DDP_COMM_HOOK=bf16 scalescope bench resnet18 -n 1")
    assert "--bucket-cap-mb 5" in command and "--channels-last" in command
    assert command.endswith("--batch-size=32 --image-size=32")


def test_reuse_command_of_a_script() -> None:
    space = parse_space(["bind_to", "--lr=0.1,0.2"], CTX)
    command = reuse_command(script_target("--lr=0.1"), space, {"bind_to": "core", "--lr": 0.2})
    assert command == f"scalescope run -n 2 --bind-to core {SCRIPT} --lr=0.2"


def test_baseline_point_only_when_every_value_is_known_and_in_the_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAUSE", "2")
    space = parse_space(["--lr=0.1,0.2", "PAUSE=1,2"], CTX)
    assert baseline_config(script_target("--lr", "0.1"), space) == {"--lr": 0.1, "PAUSE": 2}
    assert baseline_config(script_target("--lr=0.3"), space) is None
    assert baseline_config(script_target(), space) is None
    bucket = parse_space(["bucket_cap_mb=5,25"], CTX)
    assert baseline_config(script_target(), bucket) is None  # the script's own value is unknown


def test_with_arg_replaces_or_appends() -> None:
    assert with_arg(["--a", "1", "b"], "--a", "2") == ["--a=2", "b"]
    assert with_arg(["--a=1"], "--a", "2") == ["--a=2"]
    assert with_arg(["--ab=1"], "--a", "2") == ["--ab=1", "--a=2"]


def test_knobs_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KNOBS_ENV, raising=False)
    assert knobs({"workers": 2}) == {"workers": 2}
    monkeypatch.setenv(KNOBS_ENV, '{"workers": 4, "pin_memory": true}')
    assert knobs({"workers": 2}) == {"workers": 4, "pin_memory": True}
    monkeypatch.setenv(KNOBS_ENV, "[1]")
    with pytest.raises(ValueError, match="not a JSON object"):
        knobs()


def test_bench_baseline_knows_its_workload_defaults() -> None:
    bench = BenchOptions(model="resnet18", image_size=32, steps=20)
    spec = RunSpec(target="scalescope.bench.workload", is_module=True, args=bench.workload_args())
    target = TuneTarget(spec, bench)
    space = parse_space(
        ["bucket_cap_mb=5,25", "gradient_as_bucket_view", "workers=0,2", "bind_to"], CTX
    )
    expected = {"bucket_cap_mb": 25.0, "gradient_as_bucket_view": False, "workers": 0,
                "bind_to": "domain"}  # fmt: skip
    assert baseline_config(target, space) == expected


def test_reuse_command_leaves_out_a_batch_bench_chooses(tmp_path: Path) -> None:
    bench = BenchOptions(model="resnet18", image_size=32, steps=20)
    spec = RunSpec(target="scalescope.bench.workload", is_module=True, args=bench.workload_args())
    space = parse_space(["channels_last"], CTX)
    command = reuse_command(TuneTarget(spec, bench), space, {"channels_last": True})
    assert command.endswith("--channels-last --image-size=32") and "None" not in command


def test_loader_knobs_need_a_script_that_calls_knobs(tmp_path) -> None:
    from scalescope.tune.apply import target_space

    calls = tmp_path / "calls.py"
    calls.write_text("import scalescope.tune\nk = scalescope.tune.knobs({'workers': 0})\n")
    plain = tmp_path / "plain.py"
    plain.write_text("print('no knobs here')\n")
    space = ["workers=0,2"]
    knobs, notes = target_space(TuneTarget(RunSpec(target=str(calls))), space)
    assert [k.name for k in knobs] == ["workers"] and notes == ()
    with pytest.raises(ValueError, match=r"--space workers: .*plain.py never calls"):
        target_space(TuneTarget(RunSpec(target=str(plain))), space)
    with pytest.raises(ValueError, match="json never calls"):  # a module: its file is read
        target_space(TuneTarget(RunSpec(target="json", is_module=True)), space)
    # knobs that reach the script another way need no knobs()
    assert target_space(TuneTarget(RunSpec(target=str(plain))), ["bucket_cap_mb=5,25"])


def test_fsdp_knobs_reach_the_ranks_through_the_environment(tmp_path: Path) -> None:
    space = parse_space(["reshard_after_forward", "fsdp_prefetch=1,2"], CTX)
    assert [k.values for k in space] == [(True, False), (1, 2)]
    setup = trial_setup(
        script_target(), space, {"reshard_after_forward": False, "fsdp_prefetch": 2}, tmp_path
    )
    assert setup.env == {"SCALESCOPE_FSDP_RESHARD": "false", "SCALESCOPE_FSDP_PREFETCH": "2"}
    bench = BenchOptions(model="resnet18", image_size=32, steps=20, fsdp=True)
    spec = RunSpec(target="scalescope.bench.workload", is_module=True, args=bench.workload_args())
    assert baseline_config(TuneTarget(spec, bench), space) == {
        "reshard_after_forward": True,
        "fsdp_prefetch": 1,
    }
    command = reuse_command(
        TuneTarget(spec, bench), space, {"reshard_after_forward": False, "fsdp_prefetch": 1}
    )
    assert command.startswith("SCALESCOPE_FSDP_PREFETCH=1 SCALESCOPE_FSDP_RESHARD=false ")
    assert command.endswith("--fsdp")


def test_bench_fsdp_searches_fsdps_knobs_not_ddps_by_default() -> None:
    from scalescope.tune.apply import target_space

    bench = BenchOptions(model="resnet18", image_size=32, steps=20, fsdp=True)
    spec = RunSpec(target="scalescope.bench.workload", is_module=True, args=bench.workload_args())
    knobs, notes = target_space(TuneTarget(spec, bench), None)
    names = [k.name for k in knobs]
    assert {"reshard_after_forward", "fsdp_prefetch"} <= set(names)
    assert "bucket_cap_mb" not in names and "gradient_as_bucket_view" not in names
    assert "channels_last" not in names, "FSDP2 cannot shard channels_last parameters"
    assert notes == (
        "left out for this FSDP2 job: channels_last (FSDP2 cannot shard the non-contiguous "
        "parameters it makes)",
    )
    with pytest.raises(ValueError, match=r"^--space channels_last: not for this FSDP2 job"):
        target_space(TuneTarget(spec, bench), ["channels_last", "workers=0,1"])
