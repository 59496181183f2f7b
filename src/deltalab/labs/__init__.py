"""The classroom labs' checks (one module per lab, named like its folder in ``labs/``) and grading.

A lab notebook imports its checks from its own module::

    from deltalab.labs.lab02_log import check_active_files, check_table_version

Each ``check_*`` function calls the student's function on real Delta tables it builds itself
and compares the answer with what Spark and Delta report. What the checks share: what a check
reports (:mod:`deltalab.labs.report`), calling the learner's function under watch
(:mod:`deltalab.labs.student`) and the tables a check builds (:mod:`deltalab.labs.tables`). Adding a lab means adding ``labs/source/labNN_topic/`` and
``deltalab/labs/labNN_topic.py``.
"""
