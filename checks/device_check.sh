#!/bin/bash
# One lease of a GPU machine (the device tool): the CUDA-only tests, the GPU population benchmark
# (BENCH_SECONDS=0 skips it), then the default test
# suite with device=auto (CUDA there) on that machine's CPU kind. Python packages the machine lacks
# travel as wheels in .whl/ (see the device tool's notes); its own torch (CUDA) is used. Among them
# pandas < 3 with pytz and tzdata (rliable imports only with pandas < 3) and pygame-ce (Box2D,
# MiniGrid); mujoco-studio (rendering only) stays behind to keep the carried files under 64 MiB.
#   bash checks/device_check.sh OUTDIR
# Environment: FIRST (test ids run alone, full tracebacks), CUDA_TESTS=0, BENCH_SECONDS, TESTS (paths
# for the -n WORKERS run; the whole suite when empty), TEST_SECONDS, PACK_BITS=1 (checks/pack_bits.py),
# PVS=1 (checks/population_vs_single.py on CUDA: 10 seeds, members against single runs).
set -u
out=${1:?output folder}
export PYTHONUNBUFFERED=1
# Into the interpreter's own site-packages (subprocesses the tests start see them), and rlkit from
# this checkout as an editable install would put it (rlkit, rlkit_launch; envs/ as rlkit_envs).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl \
  || { echo "wheel install failed"; exit 3; }
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$PWD" > "$site/rlkit-checkout.pth"; ln -sfn "$PWD/envs" "$site/rlkit_envs"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; lscpu | grep "Model name";
  nproc; python3 -c "import torch, numpy, gymnasium, mujoco, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__, 'gymnasium', gymnasium.__version__, 'mujoco', mujoco.__version__, 'transformers', transformers.__version__)"; } 2>&1 | tee "$out/machine.txt"
# FIRST="test ids": run alone, with full tracebacks, before anything else.
[ -z "${FIRST:-}" ] || timeout 200 python3 -m pytest -q -rfE --timeout 150 --tb=long $FIRST 2>&1 | tail -80
[ "${PVS:-0}" = 0 ] || timeout 300 python3 checks/population_vs_single.py --device cuda --jobs 10 \
  --write "$out/population_vs_single.md" 2>&1 | tail -12
[ "${PACK_BITS:-0}" = 0 ] || timeout 300 python3 checks/pack_bits.py --write "$out/pack_bits.md" 2>&1 | tail -14
# The CUDA-only tests first, on their own (they skip on machines without a GPU).
[ "${CUDA_TESTS:-1}" = 0 ] || timeout 150 python3 -m pytest -q -rfEs --timeout 120 tests/rlhf/test_rlhf_cuda.py tests/gym/population/test_cuda.py \
  tests/ablation/test_pool_start.py 2>&1 | tail -15
[ "${BENCH_SECONDS:-200}" = 0 ] || timeout "${BENCH_SECONDS:-200}" python3 benchmarks/population_gpu.py --timeout 90 ${BENCH_ARGS:-} --write "$out/gpu_results.md" 2>&1 | tail -25
timeout "${TEST_SECONDS:-300}" python3 -m pytest -v -n "${WORKERS:-12}" --timeout 240 -rfE \
  --ignore=tests/ablation/test_stats.py ${TESTS:-} > "$out/pytest.log" 2>&1
echo "pytest rc=$?"; grep -E "FAILED|ERROR" "$out/pytest.log" | sort -u | head -40; tail -40 "$out/pytest.log"
