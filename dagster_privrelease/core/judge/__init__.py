"""The judge: independent checks of a release history, reading only what a ``History`` holds (the published
releases and R(j), and for publisher-side checks and the adversary's background knowledge the private snapshots
and hosting groups), never a model's internals.

- ``verifiers``: one module per paper, each guarantee checked as its paper defines it (``verify_<model>`` entry
  points for the model registry);
- ``attacks``: one module per family of adversary (taxonomy §IV-B), judged against the model's ``Bound``;
- ``utility``: what the generalisation costs an analyst;
- ``history``: ``History``, ``Report``, ``Bound``; ``report``: the two ways a report is built.
"""
