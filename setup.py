"""Everything about the distribution is in pyproject.toml, but for its home page: pip before
version 24 prints `pip show`'s "Home-page" from the core metadata's Home-page field only, which
pyproject's [project] table cannot set (its [project.urls] become Project-URL entries)."""
from setuptools import setup

setup(url="https://github.com/rnnbench/rnnbench")
