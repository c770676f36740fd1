"""The changes each finding proposes, by key, with the numbers a rule fills in
(``findings.remedy``)."""

from __future__ import annotations

REMEDIES: dict[str, str] = {
    "more_microbatches": "split the batch into {m} microbatches instead of {now} "
    "(n_microbatches): the bubble's theory falls to {pct:.0f}%",
    "more_microbatches_ds": "split the batch into {m} microbatches instead of {now} "
    "(gradient_accumulation_steps, with train_micro_batch_size_per_gpu halved to keep the "
    "batch): the bubble's theory falls to {pct:.0f}%",
    "microbatch_costs": "keep {now} microbatches: the {schedule} schedule replayed with {m} "
    "takes {after:.1f} ms a step against {before:.1f} ms with {now}, no shorter beyond the "
    "steps' noise (±{noise:.1f} ms): each microbatch's fixed costs (the host's work per "
    "forward and backward, a transfer per message, the stage's work outside its blocks) take "
    "back what the smaller bubble gives",
    "interleaved": "hold {v} stages per rank with an interleaved schedule "
    "(ScheduleInterleaved1F1B): the bubble's theory falls to {pct:.0f}%",
    "zero_bubble_left": "the zero-bubble schedule leaves no bubble in theory: what is left is "
    "waiting for a slower stage or for the transfers; even the stages' compute per microbatch "
    "(the Pipeline stages table) and keep the transfers small",
    "zero_bubble": "a zero-bubble schedule (ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble) "
    "fills the bubble with the weight gradients' backward",
    "lighten_bound": "even the stages' compute per microbatch: {bound} computes {ms:.2f} ms, "
    "{light} {light_ms:.2f} ms; move layers off {bound} to its neighbours",
    "move_blocks": "move {n} block(s) ({names}) from stage {source} to stage {target}: the "
    "slowest stage then computes {slowest:.1f} ms per microbatch; the schedule replayed gives "
    "a step of {step:.1f} ms, against {before:.1f} ms replayed now (measured {now:.1f} ms)",
    "workers": "load batches while the step runs: `scalescope bench --workers {n}`, i.e. "
    "DataLoader(num_workers={n}, persistent_workers=True, prefetch_factor=2)",
    "more_workers": "the {n} workers per rank do not keep up: raise `--workers` "
    "(num_workers) or make each sample cheaper",
    "worker_cores": "workers need cores of their own ({spare} idle on the host): lower "
    "`--threads-per-rank` to free some, or make each sample cheaper",
    "cheaper_samples": "make each sample cheaper: store images pre-resized near the training "
    "size, decode with torchvision.io.decode_jpeg or pillow-simd, augment on the device",
    "pack_files": "{files:,} files of {size} on average: pack them into tar shards "
    "(`scalescope data pack {folder} SHARDS`, WebDataset layout), stage those to local disk "
    "or RAM once per node (`scalescope data stage SHARDS /dev/shm/train`) and train with "
    "`--data /dev/shm/train`; `scalescope data bench {folder} SHARDS` compares their images/s",
    "pin_memory": "`--pin-memory` (DataLoader(pin_memory=True)) for faster copies to the GPU",
    "tp_async": "overlap them with compute: async tensor parallelism "
    "(`torch._inductor.config._micro_pipeline_tp = True` with `torch.compile`, or "
    "torchtitan's `enable_async_tensor_parallel`), and sequence parallelism so the "
    "all-reduces become reduce-scatter + all-gather",
    "tp_smaller": "a smaller tensor-parallel degree (more data or pipeline parallelism "
    "instead): each layer then issues its collectives among fewer ranks",
    "tp_in_node": "keep tensor parallelism inside a node: tp at most the GPUs (ranks) per "
    "node, as the innermost mesh dimension with a node's ranks consecutive "
    '(`init_device_mesh(device, (dp, tp), mesh_dim_names=("dp", "tp"))`), and span '
    "nodes with data or pipeline parallelism",
    "pin_and_overlap": "`DataLoader(pin_memory=True)` and `batch.to(device, non_blocking=True)`: "
    "copies from pinned memory run at the link's speed and no longer hold the host back "
    "(`scalescope bench --pin-memory`)",
    "bucket": "fuse gradients into fewer, larger messages: "
    "`DistributedDataParallel(bucket_cap_mb={mb:g})` (`scalescope bench --bucket-cap-mb "
    "{mb:g}`); Horovod's fusion buffer (HOROVOD_FUSION_THRESHOLD) is the same knob",
    "accumulate": "synchronise less often: accumulate gradients over k micro-batches under "
    "`with ddp.no_sync():` and all-reduce once per k",
    "fewer_syncs": "drop per-step collectives outside DDP (reduced loss `.item()`, metrics), "
    "and `DistributedDataParallel(forward_sync_buffers=False)` when buffers need no sync "
    "(`broadcast_buffers=False` on a torch without it)",
    "compress": "send half the bytes: `ddp.register_comm_hook(None, bf16_compress_hook)` "
    "(torch.distributed.algorithms.ddp_comm_hooks.default_hooks)",
    "hierarchical": "keep traffic on the fastest links: more ranks per node and fewer "
    "nodes, and with gloo the fast interface (GLOO_SOCKET_IFNAME)",
    "link_slow": "busbw {busbw:.3g} GB/s is {pct:.0f}% of the link's {link:.3g} GB/s: check "
    "the interface gloo/NCCL picked (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, NCCL_IB_HCA)",
    "inspect_host": "find what else runs where rank {rank} runs ({where}): `top -H`, "
    "`ps -eo pid,psr,pcpu,args`; move it away or give the rank exclusive cores "
    "(`--cpu-list`)",
    "preempted": "rank {rank}'s threads were preempted {n:,} times, the others' {m:,}: "
    "another process runs on its cpus ({where}); find it (`top -H`, `ps -eo pid,psr,pcpu,args`)"
    " and move it away, or give the rank exclusive cores (`--cpu-list`)",
    "slower_cpu": "rank {rank} used {pct:.0f}% more CPU time than the others for the same "
    "work: its cores ran slower (a virtual machine's physical core shared with a neighbour, "
    "a lower clock, thermal limits); run on homogeneous, otherwise idle nodes",
    "fewer_cores": "rank {rank} has {n} cores, the others {m}: give every rank the same "
    "share (`--map-by numa`, or `--cpu-list` per rank)",
    "slow_data": "rank {rank} spends {ms:.1f} ms/step longer loading data: check its "
    "storage, or give its loader more workers",
    "timeline_check": "check that the run directory holds the ranks of one job only (each "
    "rank file's run, the ingested traces' job) and that their clocks were aligned (the "
    "rank files' clock samples; the hosts' NTP/chrony); record again with `scalescope run`",
    "eval_sharded": "evaluate on every rank, each on its shard of the validation set "
    "(DistributedSampler(val_set, shuffle=False)), and `dist.all_reduce` the summed loss and "
    "metrics instead of gathering them on {who}: no rank waits, and evaluation is faster",
    "eval_less_often": "or evaluate less often (a larger eval interval, fewer eval batches)",
    "async_save": "save without stopping the others: `torch.distributed.checkpoint.async_save` "
    "(or a thread that writes a CPU copy of the state dict), or save less often",
    "burst_work": "look for what rank {rank} does {when} and the others do not: evaluation, "
    "logging or metric gathering on one rank, a checkpoint, garbage collection (`gc.freeze()` "
    "after setup); do it on every rank or off the training path; "
    "`scalescope report RUN_DIR --timeline trace.json` shows those steps",
    "host_work": "look for per-step host work on rank {rank}{between}: logging, `.item()` "
    "or printing tensors, file I/O, checkpointing, garbage collection (`gc.freeze()` after "
    "setup); `scalescope report RUN_DIR --timeline trace.json` shows where it falls, the "
    "`other` row of the step breakdown what it costs",
    "slow_phase": "rank {rank} spends {ms:.1f} ms/step longer {phase} than the others: "
    "its cores are shared or slower; run on homogeneous, otherwise idle nodes",
    "more_work": "rank {rank} spends {ms:.1f} ms/step longer {phase} than the others, yet "
    "its CPU time and context switches show no shared or slower cores: it does more there "
    "or waits there (larger inputs, another code path, I/O, a lock, a sleep); look at what "
    "that phase runs on rank {rank}",
    "computes_in_phase": "rank {rank} spends {ms:.1f} ms/step longer {phase} than the others, "
    "{cpu:.1f} ms/step of it computing (its CPU time there above theirs): it does more work "
    "there (larger inputs, another code path) or runs on slower cores; look at what that phase "
    "runs on rank {rank}",
    "waits_in_phase": "rank {rank} spends {ms:.1f} ms/step longer {phase} than the others, yet "
    "its CPU time there is only {cpu:.1f} ms/step above theirs: it waits {wait:.1f} ms/step "
    "off a CPU (a sleep, I/O, a lock, a device sync, a peer's message) or runnable behind "
    "another process on its cores; look at what that phase waits for on rank {rank}",
    "queued_in_phase": "rank {rank} spends {ms:.1f} ms/step longer {phase} than the others, yet "
    "its CPU time there is only {cpu:.1f} ms/step above theirs: it waits for a CPU (its threads "
    "waited {queued:.1f} ms/step on a run queue, the others' {others:.1f}): another process "
    "runs on its cpus ({where}); find it (`top -H`, `ps -eo pid,psr,pcpu,args`) and move it "
    "away, or give the rank exclusive cores (`--cpu-list`)",
    "asleep_in_phase": "rank {rank} spends {ms:.1f} ms/step longer {phase} than the others, yet "
    "its CPU time there is only {cpu:.1f} ms/step above theirs, nor does it wait for a CPU more "
    "than they do: it waits {wait:.1f} ms/step asleep or blocked (a sleep, I/O, a lock, a device "
    "sync, a peer's message); look at what that phase waits for on rank {rank}",
    "balance": "give every rank the same work and the same cores: equal batches "
    "(DistributedSampler(drop_last=True)), `--map-by numa`, homogeneous nodes",
    "channels_last": "`--channels-last` (model.to(memory_format=torch.channels_last)): "
    "oneDNN's convolutions are fastest in NHWC",
    "bf16": "`--bf16` (torch.autocast('cpu', dtype=torch.bfloat16)): this CPU has {isa}",
    "batch": "a larger batch per rank (`--batch-size {n}`) keeps the kernels busier; scale "
    "the learning rate with it",
    "compile": "`torch.compile(model)` fuses elementwise layers into the convolutions",
    "compile_matmul": "`torch.compile(model)` fuses the elementwise work (activations, "
    "norms, residual adds) around the matrix multiplications",
    "sdpa": "attention through `torch.nn.functional.scaled_dot_product_attention(q, k, v, "
    "is_causal=True)` instead of softmax(q @ k.T) written out: one fused kernel that never "
    "builds the full score matrix, on CPU as on GPU",
    "build": "a torch build with oneDNN/MKL and kernels for the CPU's vector ISA "
    "(`scalescope env` checks it)",
    "smaller_batch": "a smaller batch per rank with gradient accumulation (`no_sync()` "
    "over k micro-batches) keeps the global batch",
    "checkpoint": "activation checkpointing (`torch.utils.checkpoint`) on the largest blocks "
    "trades recomputation for memory",
    "bf16_memory": "bfloat16 autocast halves activation memory",
    "fewer_ranks": "fewer ranks per node (`--nproc-per-node`), each with more threads",
    "threads": "one compute thread per physical core: `--threads-per-rank {n}` "
    "(OMP_NUM_THREADS={n}) for {ranks} ranks on {cores} cores, without `--oversubscribe`",
    "bind": "bind each rank to its own cores: leave out `--no-bind` (ranks are bound by "
    "`--map-by numa` by default) or give `--cpu-list` per rank",
    "use_cores": "run as many threads as cores: `--threads-per-rank {n}` (torchrun sets "
    "OMP_NUM_THREADS=1 when you do not)",
    "numa": "one rank per NUMA domain with threads = its cores: `--map-by numa`",
    "unexplained": "read the {section} section of the report and `scalescope report RUN_DIR "
    "--timeline trace.json` to see where the time goes; please report the run: the "
    "diagnosis should have named this",
    "hang_host": "see what rank {rank} does (its Python stack in {run}/hang.txt): a blocking "
    "call, a wait on a file, a lock or a queue, a loop that never ends; every rank must reach "
    "each collective",
    "hang_order": "make every rank issue the same collectives in the same order: look for a "
    "collective under `if rank == ...`, or loops whose length differs between ranks",
    "hang_ended": "see why rank {rank} ended (the Failures section); ranks must run the same "
    "number of steps (DistributedSampler(drop_last=True)) and stop together",
    "hang_network": "check the network between the ranks (the interface gloo/NCCL use: "
    "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME) and that every node reaches the others",
    "hang_timeout": "make a lost collective fail instead of waiting 30 minutes: "
    "`init_process_group(..., timeout=datetime.timedelta(minutes=5))`; `scalescope run "
    "--hang-after 120 --hang-action kill` writes the stacks and stops a hung run",
    "node_straggler": "look at node {host} as a whole: another job or process on it (`top`, "
    "`ps -eo pid,psr,pcpu,args`), its CPU frequency and thermal state, its memory (swap, NUMA), "
    "its network link; leave it out of the job (`--exclude {host}` with srun, a hostfile "
    "without it with mpirun) to confirm",
    "pause_hang_after": "keep the hang watch from taking a longer pause for a hang: "
    "`scalescope run --hang-after {seconds:.0f}` (the default is 10 typical steps, at least "
    "30 s, here {default:.0f} s)",
    "pause_within_default": "the hang watch's default threshold (10 typical steps, at least "
    "30 s: {default:.0f} s here) tolerates pauses of {longest:.1f} s; if they grow towards it, "
    "raise it with `scalescope run --hang-after SECONDS`",
    "pause_async": "write checkpoints without stopping the others: "
    "`torch.distributed.checkpoint.async_save` (or save on every rank's shard with "
    "`torch.distributed.checkpoint.save`), or less often",
    "fsdp_prefetch": "prefetch the next units' all-gathers while this one computes: "
    "`block.set_modules_to_forward_prefetch([next_blocks])` and "
    "`set_modules_to_backward_prefetch([previous_blocks])` on the fully_shard modules (one "
    "or two units ahead); on a GPU they then run on their own stream under compute",
    "fsdp_no_reshard": "`fully_shard(block, reshard_after_forward=False)` for the last units "
    "({units}): their parameters stay gathered from forward to backward, which saves "
    "{regathers} all-gathers per step for their memory",
    "zero3_prefetch": "gather further ahead in fewer, larger messages: raise "
    "`zero_optimization.stage3_prefetch_bucket_size` (and `stage3_max_live_parameters`) so "
    "the next layers' parameters are fetched while this one computes",
    "zero_overlap": "`zero_optimization.overlap_comm: true` and `contiguous_gradients: true`: "
    "collectives on their own stream under the backward, gradients copied into one buffer as "
    "they are produced",
    "zero3_persist": "raise `zero_optimization.stage3_param_persistence_threshold`: "
    "parameters below it stay gathered on every rank (no all-gather for the small ones)",
    "zero3_to_stage2": "where the parameters fit on each rank, ZeRO stage 2 "
    "(`zero_optimization.stage: 2`) gathers no parameters in forward and backward: only the "
    "updated partitions once per step",
    "zero_hpz_mics": "across nodes, shard the parameters within a node and gather inside it: "
    "hpZ (`zero_hpz_partition_size`: the ranks per node) or MiCS (`mics_shard_size`: the ranks "
    "per node)",
    "zero_buckets": "larger buckets, fewer calls: raise `zero_optimization.reduce_bucket_size` "
    "and `allgather_bucket_size` (e.g. 5e8)",
    "fsdp_bigger_units": "wrap bigger blocks: call fully_shard on groups of layers (fewer, "
    "larger units) so each all-gather and reduce-scatter carries at least {size}",
    "fully_shard": "shard parameters, gradients and optimizer state across the ranks: "
    "`torch.distributed.fsdp.fully_shard` on each block, then on the model",
    "fsdp_offload": "`fully_shard(..., offload_policy=CPUOffloadPolicy())` keeps the sharded "
    "parameters and optimizer state in host memory",
    "wrap_ddp": "wrap the model in DistributedDataParallel after moving it to its device: "
    "`model = torch.nn.parallel.DistributedDataParallel(model)` (on CPU without "
    "`device_ids`), and build the optimizer from its parameters; or all-reduce the "
    "gradients yourself before `optimizer.step()`",
    "allocator": "`--allocator tcmalloc` (or jemalloc) for many threads allocating at once",
    "slow_link_test": "measure the link on its own: nccl-tests with one rank on each end "
    "(`mpirun -np 2 -H {a},{b} ./build/sendrecv_perf -b 8M -e 256M`, then `all_reduce_perf`) "
    "or `ib_write_bw` / `iperf3` between {a} and {b}, and the same between two other hosts; "
    "check both ends' NIC and port (`ibstat`, `ethtool` speed and error counters, "
    "`ip -s link`) and the cable or switch port between them",
    "slow_link_nic": "measure {host}'s link on its own: nccl-tests from {host} to another "
    "host (`mpirun -np 2 -H {host},OTHER ./build/sendrecv_perf -b 8M -e 256M`) or "
    "`ib_write_bw` / `iperf3`, against a pair without it; check its NIC and port (`ibstat`, "
    "`ethtool` speed and error counters, `ip -s link`) and its cable",
    "slow_link_iface": "make NCCL and gloo use the fast interface on every host: "
    "NCCL_IB_HCA (the HCAs, e.g. mlx5_0:1), NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME (not a "
    "management Ethernet port); `NCCL_DEBUG=INFO` prints what NCCL picked",
    "slow_link_avoid": "until it is fixed, run without {host} (`--exclude {host}` with srun, "
    "a hostfile without it with mpirun), or place the ranks so that the groups that exchange "
    "most do not cross that link",
    "slow_link_inside": "check the links inside {host}: `nvidia-smi topo -m` and "
    "`nvidia-smi nvlink -e` (NVLink errors), the GPUs' PCIe link width and speed (`lspci "
    "-vv`, LnkSta); for CPU ranks, their memory and NUMA placement (`--map-by numa`)",
}
