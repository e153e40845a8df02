"""Claims about flatness and generalization: registry, runner, records, report, CLI."""

from catalogue.kernels import pin_kernels

pin_kernels()  # before torch loads anywhere in this process (see catalogue.kernels)
