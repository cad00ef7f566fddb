"""Install mpigraph; build_py also builds the PMPI shim (csrc/build.py)."""

import os
import sys

from setuptools import Command, setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "csrc"))
from build import build_shim  # noqa: E402


class BuildPyWithShim(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            out_dir = os.path.join(HERE, "mpigraph")
        else:
            out_dir = os.path.join(self.build_lib, "mpigraph")
        build_shim(out_dir, os.path.join(HERE, "build", "shim"))


class BuildShimInPlace(Command):
    """python setup.py build_shim: put libmpigraph.so into ./mpigraph (development)."""

    description = "build libmpigraph.so next to the sources"
    user_options = []

    def initialize_options(self):
        pass

    def finalize_options(self):
        pass

    def run(self):
        print(build_shim(os.path.join(HERE, "mpigraph"), os.path.join(HERE, "build", "shim"), verbose=True))


class BinaryDistribution(Distribution):
    """The wheel holds a compiled library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithShim, "build_shim": BuildShimInPlace}, distclass=BinaryDistribution)
