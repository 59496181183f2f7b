# The README's two commands: `make lab` and `make test`. Both set everything up first.
#   make lab    PORT=8888 JUPYTER_TOKEN=... (both optional)   the learner's JupyterLab on 127.0.0.1, course index open
#   make instructor  (= make lab ROLE=instructor)            JupyterLab with nbgrader's tools, labs/ open
#   make reset NB=notebooks/02_the_transaction_log.ipynb     your copy of a notebook back to the course's
#   make test   WORKERS=2 PYTEST_ARGS='-k hello'              the package's tests and every notebook
#   make test-labs                                            every lab: solution, student version, wrong answers, grading
#   make test-seeds                                           the labs' solutions at their fixed seeds
#   make test-sizes                                           the notebooks at their smallest and larger parameters
#   make test-mutants LAB=lab02 MUTANTS_MAX=60                each lab's checks against mutants of its solution
#   make test-cluster CLUSTER_NOTEBOOKS=all|ci|00_hello_delta,... notebooks on a loopback Spark cluster
#   make classroom STUDENTS=ada,bo INSTRUCTORS=ina          JupyterHub with the course for a class, on 127.0.0.1:8000
#   make test-classroom                                       the classroom's tests: a hub, three students, notebook 00, a lab
#   make outputs NB=notebooks/02_the_transaction_log.ipynb   re-run notebooks in place (committed outputs)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8888
WORKERS ?= 2
PYTEST_ARGS ?=
# make test-mutants: at most MUTANTS_MAX mutants per lab (0: all), at most MUTANTS_MINUTES per lab; LAB=lab02 for one.
MUTANTS_MAX ?= 60
MUTANTS_MINUTES ?= 20
LAB ?=
NB ?= notebooks/*.ipynb
# Who JupyterLab is for: learner (the default) or instructor. Read from the command line only
# (make lab ROLE=instructor), so that an unrelated ROLE in the environment cannot change the course.
ifneq ($(origin ROLE),command line)
ROLE := learner
endif
ifeq ($(filter learner instructor,$(ROLE)),)
$(error ROLE=$(ROLE) is not a JupyterLab role: run `make lab` (learner) or `make instructor`)
endif

.PHONY: help setup lab instructor reset classroom test test-labs test-seeds test-mutants test-sizes test-cluster test-classroom outputs doctor lock clean

help:
	@sed -n '1,13p' Makefile

$(VENV)/.installed: pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "deltalab needs Python 3.11 or newer (the pinned numpy and matplotlib do); run e.g. make PYTHON=python3.11 ...")'
	@echo "Installing the course's pinned packages into $(VENV) (once: a few minutes; pip shows each download) ..."
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --disable-pip-version-check -c requirements.lock -e '.[course,test,labs,classroom]'
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	cp src/deltalab/jupyterlab_overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

# The kernels' settings ({sys.prefix}/etc/ipython, which every IPython kernel of this venv reads):
# the kernel's own log only at CRITICAL, so that papermill, nbval and JupyterLab do not print ipykernel's
# "running over TCP without encryption" (the kernels listen on 127.0.0.1 only) nor "KeyboardInterrupt caught
# in kernel." (an ERROR: jupyter_client interrupts a kernel before shutting it down, and on a busy machine the
# signal can land while the kernel still handles a message; seen once in CI);
# and at start deltalab.plots.watch_figure_labels(), which prints under a figure the labels that overlap.
KERNEL_CONFIG := $(VENV)/etc/ipython/ipython_kernel_config.json
$(KERNEL_CONFIG): src/deltalab/ipython_kernel_config.json $(VENV)/.installed
	@mkdir -p $(@D)
	@cp $< $@

# The virtual environment from the pins, then Delta's jars (downloaded once, offline afterwards).
setup: $(VENV)/.installed $(KERNEL_CONFIG)
	@$(PY) -m deltalab fetch-jars
	@$(PY) -m deltalab doctor

# JupyterLab for the ROLE: python -m deltalab lab (src/deltalab/jupyterlab.py, which the course
# image runs too) puts the role's settings folder of src/deltalab/jupyter/ first on
# JUPYTER_CONFIG_PATH, starts in the role's folder (labs/ for the instructor, for nbgrader) with the
# venv's bin/ on PATH, and opens the role's index. A JUPYTER_TOKEN set here reaches jupyter through
# the environment, never the command line; without one, jupyter prints the one it made.
# Quiet when all is ready: the jar and doctor lines appear only when something is downloaded or wrong.
lab: $(VENV)/.installed $(KERNEL_CONFIG)
	@$(PY) -m deltalab fetch-jars --quiet
	@$(PY) -m deltalab doctor --quiet
	@echo "Starting JupyterLab for the $(ROLE) on 127.0.0.1 port $(PORT): open the URL it prints below (its token, or the JUPYTER_TOKEN you set)."
	@$(PY) -m deltalab lab --role $(ROLE) --port $(PORT) --root "$(CURDIR)" $(if $(DELTALAB_NO_BROWSER),--no-browser)

# The learner's copy of one notebook (or lab) back to the course's: theirs goes to backups/ in the
# workspace (~/deltalab-course, or DELTALAB_LEARNER_DIR) that `make lab` serves and updates.
reset: $(VENV)/.installed
	@$(if $(filter command line,$(origin NB)),$(PY) -m deltalab workspace reset $(NB),echo "make reset needs the file: make reset NB=notebooks/02_the_transaction_log.ipynb (its path in $$($(PY) -m deltalab workspace where))" >&2; exit 2)

# The instructor's JupyterLab: `make lab` with ROLE=instructor.
instructor: override ROLE := instructor
instructor: lab

# --no-loadscope-reorder: the files in tests/conftest.py's order (the longest first), not xdist's (most items first).
test: setup
	$(PY) -m pytest $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist loadfile --no-loadscope-reorder) $(PYTEST_ARGS)

# The labs (marker labs): each lab's solution passes its checks on tables of a fresh seed, its student
# version is told in plain words what is not written yet, every wrong answer of tests/test_labNN_*.py is
# refused with a message that names the mistake, and labs/README.md's grading steps work as written.
# A target of its own so that each stays short (the aim: 15 minutes on two cores each; tests/README.md); CI runs both.
# --dist loadfile: a file runs on one worker (a lab's tests share the tables they build once per process).
test-labs: setup
	$(PY) -m pytest $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist loadfile --no-loadscope-reorder) -m "labs and not seeds and not mutants" tests/test_lab*.py $(PYTEST_ARGS)

# The labs' solutions at their fixed seeds, which together cover every edge case the checks generate (for
# a lab's author; not in CI, whose make test-labs draws a fresh seed each run: tests/README.md).
test-seeds: setup
	$(PY) -m pytest $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist loadfile --no-loadscope-reorder) -m seeds tests/test_lab*.py $(PYTEST_ARGS)

# Each lab's checks against mutants of its own solution (tests/support/mutants.py): every small wrong version of
# the solution must fail a check, or be listed as equivalent in tests/mutants_allowed.toml. One test per lab,
# --dist load spreads the labs over the workers; the reports go to build/mutants/<lab>.md (printed: -rA).
# Hours for every lab (about 5 to 20 minutes a lab); not in CI: tests/README.md.
test-mutants: setup
	DELTALAB_MUTANTS_MAX=$(MUTANTS_MAX) DELTALAB_MUTANTS_LAB_MINUTES=$(MUTANTS_MINUTES) $(PY) -m pytest $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist load) -rA -m mutants tests/test_lab_mutants.py $(if $(LAB),-k $(LAB)) $(PYTEST_ARGS)

# The notebooks with papermill at their smallest parameters and at larger ones (tests/test_sizes.py):
# their asserts must hold at any size their parameters cell accepts. About an hour; not in CI.
test-sizes: setup
	$(PY) -m pytest $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS)) -m sizes tests/test_sizes.py $(PYTEST_ARGS)

# Notebooks on a Spark standalone cluster started on 127.0.0.1 (deltalab.cluster), one at a time:
# every notebook by default, CLUSTER_NOTEBOOKS=ci for CI's subset, or a comma-separated list of names.
CLUSTER_NOTEBOOKS ?= all
test-cluster: setup
	DELTALAB_CLUSTER_NOTEBOOKS=$(CLUSTER_NOTEBOOKS) $(PY) -m pytest -m cluster tests/test_cluster.py $(PYTEST_ARGS)

# JupyterHub for a class on this machine (deltalab.classroom): each student logs in with the class
# password (DELTALAB_CLASSROOM_PASSWORD, else one drawn once and printed) and gets the learner's
# JupyterLab on a workspace of their own; instructors, the hub's admins, have a password of their own
# (DELTALAB_CLASSROOM_INSTRUCTOR_PASSWORD, likewise). State under ~/deltalab-classroom.
STUDENTS ?= student1,student2,student3
INSTRUCTORS ?= instructor
CLASSROOM_PORT ?= 8000
classroom: setup
	@$(PY) -m deltalab classroom --students=$(STUDENTS) --instructors=$(INSTRUCTORS) --port=$(CLASSROOM_PORT)

# A hub on 127.0.0.1 with three students and an instructor (tests/test_classroom*.py, marker classroom):
# logins, workspaces, notebook 00 in three servers at once, a lab through nbgrader's exchange. CI runs them in the course image.
test-classroom: setup
	$(PY) -m pytest $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist loadfile --no-loadscope-reorder) -m classroom tests/test_classroom.py tests/test_classroom_culler.py $(PYTEST_ARGS)

outputs: setup
	$(PY) -m deltalab execute $(NB)

doctor: $(VENV)/.installed
	$(PY) -m deltalab doctor --smoke

# Re-resolve the newest versions allowed by pyproject.toml into requirements.lock.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet --disable-pip-version-check -e '.[course,test,labs,classroom]'
	{ sed -n '/^#/p' requirements.lock; .lock-venv/bin/pip freeze --exclude-editable | grep -v '^deltalab'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock && rm -rf .lock-venv

clean:
	rm -rf $(VENV) .lock-venv
