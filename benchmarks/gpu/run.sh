# The accelerator check of the model families (a machine with JAX, PyTorch and a GPU, no
# TensorFlow): Keras travels as wheels in .whl/ (keras, namex, optree for its Python).
# Run from the repository root: bash benchmarks/gpu/run.sh
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
KERAS_BACKEND=jax python3 -c "import keras, jax, torch; print('keras', keras.__version__, 'jax', jax.__version__, 'torch', torch.__version__)"
for b in jax torch; do
  echo "=== families harness on $b (GPU)"
  KERAS_BACKEND=$b timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/models/test_families.py --timeout 200 2>&1 | tail -6
  echo "=== generation on $b (GPU)"
  KERAS_BACKEND=$b timeout 150 python3 benchmarks/gpu/generation_check.py 2>&1 | grep -v Warning | tail -8
done
# The layer tests in one process per backend: JAX takes most of the GPU's memory in each
# process it starts, so parallel workers on one GPU fail for memory, not for the code.
echo "=== layer tests on jax and torch (GPU), one process"
for b in jax torch; do
  JAX_DEFAULT_MATMUL_PRECISION=highest KERAS_BACKEND=$b timeout 300 python3 -m pytest -q \
    -p no:cacheprovider -o addopts="" tests/layers --timeout 120 2>&1 | tail -8
done
