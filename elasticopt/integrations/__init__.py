"""Drop-in policies for research schedulers' own simulators (docs/integrations.md).

Each module here is one self-contained file, standard library only, Python
>= 3.8, meant to be **copied** into the host's environment (which often cannot
import elasticopt) and to talk to ``elasticopt serve`` there:

- :mod:`~elasticopt.integrations.pollux`: ``PolluxPolicy`` (Pollux / AdaptDL simulator);
- :mod:`~elasticopt.integrations.sia`: ``SiaPolicy`` (Sia, GPU types per node);
- :mod:`~elasticopt.integrations.blox`: ``BloxPolicy`` and ``BloxPlacement`` (Blox);
- :mod:`~elasticopt.integrations.gavel`: ``GavelPolicy`` (Gavel).

The files do not import each other or this package: the small client they
share is repeated in each (a test keeps the copies identical).
"""
