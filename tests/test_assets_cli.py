"""``otel-loopguard assets``: the shipped dashboard and rules, written out of the package."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_dashboards import DASHBOARDS

from otel_loopguard.cli import main
from otel_loopguard.cli._assets import asset_files, assets_folder

NAMES = ["alerts.yaml", "alerts_test.yaml", "loopguard.json"]


class TestAssets:
    def test_ships_the_dashboard_and_rules(self) -> None:
        """The package carries exactly the dashboard, the rules and the rules' unit tests."""
        assert list(asset_files()) == NAMES

    def test_shipped_copies_are_dashboards(self) -> None:
        """What the command hands out (the installed package's copies, or dashboards/ in a
        checkout) is byte for byte the repository's dashboards/."""
        if not DASHBOARDS.is_dir():
            pytest.skip("no dashboards/ next to the tests")
        assert asset_files() == {name: (DASHBOARDS / name).read_bytes() for name in NAMES}

    def test_checkout_reads_dashboards(self) -> None:
        """Without copies in the package (a source checkout), the files come from dashboards/."""
        folder = assets_folder()
        if Path(str(folder)).name == "assets":
            pytest.skip("an installed package: it has its own copies")
        assert Path(str(folder)) == DASHBOARDS

    def test_list(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--list`` prints one file name per line and exits 0."""
        assert main(["assets", "--list"]) == 0
        assert capsys.readouterr().out.split() == NAMES

    def test_writes_byte_identical_copies(self, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """``--output DIR`` creates the directory and writes each file as shipped."""
        out = tmp_path / "new" / "dir"
        assert main(["assets", "--output", str(out)]) == 0
        for name in NAMES:
            assert (out / name).read_bytes() == (DASHBOARDS / name).read_bytes()
        assert capsys.readouterr().out.split() == [str(out / n) for n in NAMES]

    def test_rewriting_identical_files_says_nothing_changed(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Running it twice into the same directory succeeds, and the second run says that
        nothing changed, without touching the files."""
        assert main(["assets", "-o", str(tmp_path)]) == 0
        assert capsys.readouterr().err == f"otel-loopguard: wrote 3 files to {tmp_path}\n"
        stamps = {n: (tmp_path / n).stat().st_mtime_ns for n in NAMES}
        assert main(["assets", "-o", str(tmp_path)]) == 0
        assert capsys.readouterr().err == (
            f"otel-loopguard: nothing changed: the 3 files in {tmp_path} are up to date\n")
        assert {n: (tmp_path / n).stat().st_mtime_ns for n in NAMES} == stamps

    def test_writes_only_what_is_missing(self, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        """With one file already up to date, the others are written and the count says so."""
        assert main(["assets", "-o", str(tmp_path)]) == 0
        (tmp_path / "alerts.yaml").unlink()
        capsys.readouterr()
        assert main(["assets", "-o", str(tmp_path)]) == 0
        assert capsys.readouterr().err == (
            f"otel-loopguard: wrote 1 file to {tmp_path} (2 unchanged)\n")

    def test_refuses_to_overwrite_changed_file(self, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        """A file edited by the user is kept: exit 2 and one line naming it, nothing written."""
        (tmp_path / "alerts.yaml").write_text("# my rules\n")
        assert main(["assets", "-o", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{tmp_path / 'alerts.yaml'} exists with other content" in err
        assert "--force" in err
        assert (tmp_path / "alerts.yaml").read_text() == "# my rules\n"
        assert not (tmp_path / "loopguard.json").exists()

    def test_force_overwrites(self, tmp_path: Path) -> None:
        """``--force`` replaces a changed file with the shipped one."""
        (tmp_path / "alerts.yaml").write_text("# my rules\n")
        assert main(["assets", "-o", str(tmp_path), "--force"]) == 0
        assert (tmp_path / "alerts.yaml").read_bytes() == (DASHBOARDS / "alerts.yaml").read_bytes()

    def test_unwritable_directory_is_one_line(self, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
        """A path that cannot be a directory gives exit 2 and one line, no traceback."""
        blocker = tmp_path / "file"
        blocker.write_text("")
        assert main(["assets", "-o", str(blocker / "sub")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"otel-loopguard: cannot write to {blocker / 'sub'}")
        assert err.count("\n") == 1

    def test_a_file_as_the_directory(self, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
        """-o naming a file says it is not a directory (it said "File exists")."""
        target = tmp_path / "passwd"
        target.write_text("root:x:0:0\n")
        assert main(["assets", "-o", str(target)]) == 2
        assert capsys.readouterr().err == (f"otel-loopguard: {target}: not a directory (-o names "
                                           "the directory to write the files in)\n")
        assert target.read_text() == "root:x:0:0\n"

    def test_needs_output_or_list(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without ``--output`` or ``--list`` it is a usage error (exit 2)."""
        with pytest.raises(SystemExit) as exc:
            main(["assets"])
        assert exc.value.code == 2
        assert "--output" in capsys.readouterr().err
