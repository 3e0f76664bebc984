"""A benchmark's machine record names the host's instruction sets: the same "AMD EPYC" label
has covered hosts ~5x apart for the same tree (bench/results/2026-11-29-host)."""

from bench.common import cpu_details, cpu_label, machine_info

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 2445.410
flags\t\t: fpu sse2 fma avx avx2 bmi2

processor\t: 1
model name\t: something else
flags\t\t: avx512f avx512_vnni
"""


def test_the_first_processors_family_model_and_simd_are_recorded():
    got = cpu_details(ZEN3)
    assert got == {
        "cpu": "AMD EPYC",
        "cpu_family_model": "25/1",
        "cpu_mhz": 2445,
        "simd": ["avx2"],  # the second processor's flags are not read
    }


def test_a_host_with_vnni_says_so_and_missing_fields_do_not_fail():
    got = cpu_details("model name\t: X\nflags\t\t: avx2 avx512f avx512_vnni amx_int8\n")
    assert got["simd"] == ["avx2", "avx512f", "avx512_vnni", "amx_int8"]
    assert got["cpu_family_model"] == "?/?" and got["cpu_mhz"] is None
    assert cpu_details("")["simd"] == []


def test_machine_info_carries_the_details():
    info = machine_info()
    assert {"nproc", "ram_gib", "cpu", "cpu_family_model", "simd", "platform"} <= info.keys()


def test_a_report_names_the_host_by_its_instruction_sets():
    assert cpu_label({"cpu": "AMD EPYC"}) == "AMD EPYC"  # a record from before
    new = {"cpu": "AMD EPYC", "cpu_family_model": "25/1", "simd": ["avx2"]}
    assert cpu_label(new) == "AMD EPYC, family/model 25/1, avx2"
