from pathlib import Path

import pytest
from PIL import Image

from scalescope.bench.workload import World, build_parser, main, make_dataset, parse_args


def parse(*argv: str):
    return parse_args(build_parser(), list(argv))


def test_defaults() -> None:
    args = parse("resnet18")
    assert (args.batch_size, args.image_size, args.steps, args.epochs) == (32, 224, 50, None)
    assert (args.warmup_steps, args.lr, args.bucket_cap_mb, args.seed) == (5, 0.01, 25.0, 0)
    assert (args.workers, args.display_every, args.num_classes) == (0, 10, 1000)
    assert not (args.channels_last or args.bf16 or args.pin_memory)


def test_synthetic_length_covers_the_steps() -> None:
    world = World(rank=0, local_rank=0, world_size=2)
    assert len(make_dataset(parse("resnet18", "--steps", "6", "--batch-size", "4"), world)) == 48
    assert len(make_dataset(parse("resnet18", "--epochs", "1"), world)) == 2560
    args = parse("resnet18", "--epochs", "1", "--synthetic-images", "100")
    assert len(make_dataset(args, world)) == 100


def test_data_sets_classes_and_workers(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.new("RGB", (8, 8)).save(tmp_path / name / "x.jpg")
    args = parse("resnet18", "--data", str(tmp_path))
    assert (args.num_classes, args.workers) == (2, 2)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nosuchnet"], "unknown model 'nosuchnet'"),
        (["resnet18", "--steps", "3", "--epochs", "1"], "not allowed with argument"),
        (["resnet18", "--steps", "5", "--warmup-steps", "5"], "must be less than --steps"),
        (["resnet18", "--batch-size", "0"], "must be a positive integer"),
        (["resnet18", "--data", "/nonexistent/dir"], "does not exist"),
        (["resnet18", "--fsdp", "--channels-last"], "--channels-last does not go with --fsdp"),
    ],
)
def test_bad_options_exit_2(argv: list[str], expected: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    assert expected in capsys.readouterr().err


def test_outside_a_launcher_exits_2(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as info:
        main(["resnet18"])
    assert info.value.code == 2
    assert "run under torchrun" in capsys.readouterr().err


def test_the_bench_command_refuses_channels_last_with_fsdp() -> None:
    from scalescope.bench.options import BenchOptions

    with pytest.raises(ValueError, match=r"^--channels-last does not go with --fsdp: FSDP2"):
        BenchOptions(model="resnet18", fsdp=True, channels_last=True)
    assert BenchOptions(model="resnet18", channels_last=True).channels_last
