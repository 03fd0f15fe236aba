"""linrec._lazy: Lazy attributes for packages (PEP 562): a package's submodules, and names homed elsewhere, imported
on first use."""

from __future__ import annotations

import subprocess
import sys


def test_linrec_reaches_submodules_lazily_and_stays_cheap_to_import():
    code = (
        "import sys, linrec\n"
        "assert 'torch' not in sys.modules and 'linrec.analysis' not in sys.modules\n"
        "assert {'analysis', 'notebook', 'plots', 'measure'} <= set(dir(linrec))\n"
        "assert callable(linrec.analysis.bilinear.probe_sweep) and 'linrec.analysis.bilinear' in sys.modules\n"
        "assert linrec.analysis.bilinear is sys.modules['linrec.analysis.bilinear']\n"
        "assert callable(linrec.plots.use_book_style) and linrec.measure is linrec.core.measure.measure\n"
        "for missing in ('linrec.nothing', 'linrec.analysis.nothing', 'linrec.analysis._private'):\n"
        "    owner, name = missing.rsplit('.', 1)\n"
        "    try:\n"
        "        getattr(eval(owner), name)\n"
        "    except AttributeError as err:\n"
        "        assert repr(name) in str(err), err\n"
        "    else:\n"
        "        raise AssertionError(missing)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
