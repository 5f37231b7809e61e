"""``numpy.fft`` on CUDA tensors: not provided yet (pocketfft runs on the host), so every
transform raises NotImplementedError naming itself, before anything records."""

import numpy as np
import pytest

import autograd_nb as anb
import autograd_nb.numpy as anp

TRANSFORMS = ("fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn hfft "
              "ihfft").split()


@pytest.mark.parametrize("name", TRANSFORMS)
def test_the_transforms_raise_on_cuda_tensors(name):
    x = anb.tensor(np.ones((2, 4)), requires_grad=True, device="cuda")
    with pytest.raises(NotImplementedError, match=f"numpy.fft.{name} is not implemented for "
                                                  "CUDA tensors"):
        getattr(anp.fft, name)(x)
