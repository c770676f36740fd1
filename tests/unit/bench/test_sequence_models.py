"""The suite's sequence workloads compute what they claim: the synthetic tokens have the
documented shape and range with next-token targets, both models are causal (a later token
cannot change an earlier output), and training them lowers a finite loss. The training runs
the workload's own ``run`` in one real rank (gloo, world size 1)."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from scalescope.bench import sequence_workload
from scalescope.bench.rank_env import World
from scalescope.bench.sequence_models import SyntheticTokens, build_sequence_model

VOCAB, SEQ_LEN, HIDDEN = 50, 16, 32


def test_tokens_have_the_documented_shape_range_and_next_token_targets() -> None:
    data = SyntheticTokens(length=200, seq_len=SEQ_LEN, vocab=VOCAB, seed=3)
    assert len(data) == 200
    seen = []
    for i in range(len(data)):
        inputs, targets = data[i]
        assert inputs.shape == targets.shape == (SEQ_LEN,)
        assert inputs.dtype == targets.dtype == torch.int64
        assert torch.equal(inputs[1:], targets[:-1]), "targets are not the next tokens"
        seen.append(torch.cat([inputs, targets[-1:]]))
    tokens = torch.stack(seen)
    assert tokens.min() >= 0 and tokens.max() < VOCAB
    assert len(tokens.unique()) > 0.9 * VOCAB, "the tokens do not span the vocabulary"
    again = SyntheticTokens(length=200, seq_len=SEQ_LEN, vocab=VOCAB, seed=3)
    assert all(torch.equal(again[i][0], data[i][0]) for i in range(len(data)))
    with pytest.raises(IndexError):
        data[200]


@pytest.mark.parametrize("name", ["lstm", "transformer"])
def test_a_later_token_cannot_change_an_earlier_output(name: str) -> None:
    torch.manual_seed(0)
    model = build_sequence_model(name, VOCAB, HIDDEN, SEQ_LEN).eval()
    tokens = torch.randint(0, VOCAB, (2, SEQ_LEN))
    changed_at = SEQ_LEN // 2
    other = tokens.clone()
    other[:, changed_at] = (other[:, changed_at] + 1) % VOCAB
    with torch.no_grad():
        before, after = model(tokens), model(other)
    assert before.shape == (2, SEQ_LEN, VOCAB)
    torch.testing.assert_close(after[:, :changed_at], before[:, :changed_at])
    assert not torch.allclose(after[:, changed_at:], before[:, changed_at:]), "no effect at all"


@pytest.fixture
def one_rank(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("name", "lr"), [("lstm", 0.5), ("transformer", 0.2)])
def test_training_lowers_a_finite_loss(one_rank: None, name: str, lr: float) -> None:
    """The pool of 64 sequences is learnt by heart: the loss falls well below the uniform
    guess, ln(vocab), where an untrained model starts."""
    argv = [name, f"--hidden={HIDDEN}", f"--seq-len={SEQ_LEN}", f"--vocab={VOCAB}",
            "--batch-size=8", "--steps=200", "--warmup-steps=1", f"--lr={lr}"]  # fmt: skip
    args = sequence_workload.parse_args(sequence_workload.build_parser(), argv)
    record = sequence_workload.run(args, World(0, 0, 1), torch.device("cpu"))
    first, final = record.result["first_loss"], record.result["final_loss"]
    assert math.isfinite(first) and math.isfinite(final), record.result
    assert first == pytest.approx(math.log(VOCAB), rel=0.15)
    assert final < 0.9 * first, record.result
