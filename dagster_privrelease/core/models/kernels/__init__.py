"""The kernels the models share, each named by what it does (pure numpy; no DuckDB, no Dagster).

- ``split``: the split phase of Xiao-Tao §4.3 (balanced buckets halved into QI groups of one tuple per value,
  least perimeter first), with ``normalised`` (its input) and ``number_groups`` (its output's ids); used by
  m-invariance, and by m-Distinct with Li-Zhou eq. 4's relative score;
- ``buckets``: division, balancing and assignment (Xiao-Tao §4.1, Fig. 3) and m-eligibility
  (``eligible_cap``); used by m-invariance, m-Distinct and the possible worlds of sequential l-diversity;
- ``hosts``: the groups that last hosted the tuples of T(n) (``last_groups``); used by m-invariance and m-Distinct;
- ``partition``: Mondrian's multidimensional strict partition (``partition``, ``domain_widths``); used by the
  baselines (``models.mondrian``), m-invariance's first release and the possible worlds of sequential l-diversity.
"""
