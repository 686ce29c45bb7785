import memlane


def test_all_is_sorted_and_complete() -> None:
    exported = memlane.__all__
    assert exported == sorted(exported)
    public = {
        name
        for name in dir(memlane)
        if not name.startswith("_") and name[0].isupper() and name != "TYPE_CHECKING"
    }
    assert public <= set(exported), public - set(exported)
    for name in exported:
        assert getattr(memlane, name) is not None


def test_import_does_not_load_heavy_modules() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memlane;"
        "heavy = [m for m in ('torch', 'sentence_transformers', 'onnxruntime', 'chromadb')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
