"""bench/ncu_families.py: bandwidth per kernel family from ncu's raw CSV."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
import ncu_families  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"')


def row(i, name, read, write, time):
    return f'"{i}","7","cuda_decode_bench","h","{name}","1","13","{read}","{write}","{time}"'


def test_families_and_bandwidth_from_ncu_output(tmp_path):
    lines = [
        "==PROF== Connected to process 7",
        "mamba-130m: copy bandwidth 3000 GB/s, weights bf16, graphs off",
        HEADER,
        '"","","","","","","","byte","byte","nsecond"',
        # Two Gemv launches: 3 MB in 2 us -> 1500 GB/s, half the copy bandwidth.
        row(0, "void seqboat::cuda::GemvKernel<1, true>(GemvParams, int)", "1,000,000",
            "500,000", "1,000"),
        row(1, "GemvKernel<4, false>", "1500000", "0", "1000"),
        row(2, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "9000000",
            "0", "6000"),
        row(3, "nvjet_hsh_128x64_64x4_1x2_h_bz_NNT", "3000000", "0", "2000"),
        row(4, "MambaScanKernel", "600000", "0", "1000"),
        row(5, "gemv2T_kernel_val<int, int, float, 128, 16, 4, 4, false>", "0", "0", "0"),
        " batch  tok/s",
    ]
    out, copy_gbs = ncu_families.families(lines)
    assert copy_gbs == 3000
    assert set(out) == {"Gemv", "cuBLAS", "MambaScan"}
    assert out["Gemv"]["launches"] == 2 and out["cuBLAS"]["launches"] == 3
    assert out["Gemv"]["bytes"] == pytest.approx(3e6)
    assert out["Gemv"]["seconds"] == pytest.approx(2e-6)
    text = ncu_families.report(out, copy_gbs)
    gemv = next(line for line in text.splitlines() if line.startswith("Gemv"))
    assert "1500" in gemv and "50.0%" in gemv
    # cuBLAS took 8 of the 11 us.
    assert "72.7%" in next(line for line in text.splitlines() if line.startswith("cuBLAS"))

    p = tmp_path / "ncu.txt"
    p.write_text("\n".join(lines))
    run = subprocess.run([sys.executable, str(ROOT / "bench/ncu_families.py"), str(p)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].split()[:2] == ["family", "launches"]


def test_scaled_units_and_a_missing_table():
    lines = [HEADER, '"","","","","","","","Mbyte","Kbyte","usecond"',
             row(0, "RmsNormKernel", "2", "500", "4")]
    out, copy_gbs = ncu_families.families(lines)
    assert copy_gbs is None
    assert out["RmsNorm"]["bytes"] == pytest.approx(2.5e6)
    assert out["RmsNorm"]["seconds"] == pytest.approx(4e-6)
    assert "-" in ncu_families.report(out, None).splitlines()[1]
    with pytest.raises(ValueError, match="no ncu CSV table"):
        ncu_families.families(["no table here"])
    with pytest.raises(ValueError, match="lacks dram__bytes_write.sum"):
        ncu_families.families(['"ID","Kernel Name","dram__bytes_read.sum",'
                               '"gpu__time_duration.sum"'])
