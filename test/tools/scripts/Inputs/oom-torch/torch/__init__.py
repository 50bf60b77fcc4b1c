"""A stand-in for PyTorch whose GPU has no room for the model: moving it
to the GPU raises CUDA's out-of-memory error, as torch does."""
import types


class _OutOfMemoryError(RuntimeError):
    pass


class _Module:
    def __init__(self, *args, **kwargs):
        pass

    def cuda(self):
        raise _OutOfMemoryError("CUDA out of memory")

    def parameters(self):
        return []

    def named_parameters(self):
        return []


def _properties(device):
    return types.SimpleNamespace(total_memory=81559 * 2**20)


cuda = types.SimpleNamespace(OutOfMemoryError=_OutOfMemoryError,
                             get_device_properties=_properties,
                             empty_cache=lambda: None)


backends = types.SimpleNamespace(
    cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)),
    cudnn=types.SimpleNamespace(allow_tf32=False))


def manual_seed(seed):
    pass
