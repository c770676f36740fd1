"""A bare torch.distributed allreduce loop, the reference for ``scalescope comm``'s times:
for each size, warm-up calls, then timed calls each after a barrier; a call's time is the
slowest rank's. Writes {nbytes: [seconds, ...]} as JSON. It knows nothing of scalescope.

    torchrun --standalone --nproc-per-node 2 bare_allreduce.py ITERS WARMUP OUT NBYTES...
"""

import json
import sys
import time

import torch
import torch.distributed as dist


def main() -> None:
    iters, warmup, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo")
    result = {}
    for nbytes in map(int, sys.argv[4:]):
        tensor = torch.ones(nbytes // 4, dtype=torch.float32)
        times = []
        for i in range(warmup + iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            if i >= warmup:
                times.append(time.perf_counter() - start)
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        result[nbytes] = slowest.tolist()
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
