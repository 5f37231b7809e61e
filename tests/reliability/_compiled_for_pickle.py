"""Compiled functions at module level, which tests/reliability/test_fault_probes.py sends to
other processes: pickle finds them by their module and name."""

import autograd_nb as anb


@anb.compile
def energy(x):
    return anb.sum(anb.tanh(x) * x)


def plain_energy(x):
    return anb.sum(anb.sin(x) * x)


#: Not decorated: ``plain_energy`` keeps its own name, so this pickles as fn and its options.
compiled_plain_energy = anb.compile(plain_energy, strict=True)


class Model:
    """A compiled method: pickled by the path through its class."""

    @anb.compile
    def loss(self, x):
        return anb.sum(anb.exp(x) * 0.5)


model = Model()
