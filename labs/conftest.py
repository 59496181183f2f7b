"""Keep nbval away from the lab notebooks.

The repository runs pytest with ``--nbval`` (full output comparison) over ``labs/`` too. Lab
notebooks are not stored with outputs (students get them empty; submissions are graded by
nbgrader), so none of them is collected here: ``tests/test_labs.py`` runs the sources, the
generated student versions and graded submissions itself.
"""

collect_ignore_glob = ["*.ipynb", "*/*.ipynb", "*/*/*.ipynb", "*/*/*/*.ipynb", "*/*/*/*/*.ipynb"]
