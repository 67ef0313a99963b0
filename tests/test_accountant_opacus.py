"""test_accountant_opacus.py — build/dp-accountant against Opacus's own RDP accountant (the .venv's
opacus 1.6.0, opacus.accountants.analysis.rdp) on a grid of σ, q, steps and δ where both give a
finite ε: same value to 1e-9 relative (the command prints 11 digits). The grid reaches σ = 1e-150,
the smallest σ where Opacus's arithmetic still holds (below it Opacus's fractional series meets NaN
and loops forever, or drops the NaN terms); there the C accountant must agree, and below it must say
+inf (tests/test_accountant.c sweeps that side). Usage: test_accountant_opacus.py BUILD"""
import math
import subprocess
import sys
import warnings

from opacus.accountants.analysis import rdp

warnings.simplefilter("ignore")   # "optimal order is the largest alpha": expected at large σ
ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))   # Opacus's DEFAULT_ALPHAS
build = sys.argv[1]
fails, compared = 0, 0
for sigma in (1e-150, 1e-3, 0.5, 1.0, 2.5, 1e3):
    for q in (1e-4, 0.01, 0.3, 1.0):
        for steps, delta in ((1, 1e-8), (1000, 1e-5)):
            want, _ = rdp.get_privacy_spent(orders=ORDERS, delta=delta,
                                            rdp=rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=ORDERS))
            out = subprocess.run([build + "/dp-accountant", "--sigma", repr(sigma), "--sample-rate", repr(q),
                                  "--steps", str(steps), "--delta", repr(delta)], capture_output=True, text=True)
            words = out.stdout.split()
            got = float(words[1]) if out.returncode == 0 and len(words) > 1 and words[0] == "epsilon" else math.nan
            ok = math.isfinite(want) and math.isfinite(got) and abs(got - want) <= 1e-9 * abs(want)
            if not ok:
                fails += 1
                print("FAIL sigma %g q %g steps %d delta %g: opacus %r, dp-accountant %r (rc %d, %s)"
                      % (sigma, q, steps, delta, float(want), got, out.returncode, (out.stdout + out.stderr).strip()))
            compared += 1
print("%d of %d (sigma, q, steps, delta) agree with Opacus %s to 1e-9 (sigma 1e-150 .. 1e3)"
      % (compared - fails, compared, __import__("opacus").__version__))
sys.exit(1 if fails else 0)
