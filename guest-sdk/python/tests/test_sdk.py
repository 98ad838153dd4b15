"""Unit tests of the SDK in CPython, against componentize-py's stub bindings (`componentize-py
bindings`), with the host's functions replaced by recorders. Run by
tests/all/plugin_authoring_python.rs:

    componentize-py -d wit -w gatherer bindings BINDINGS
    PYTHONPATH=BINDINGS:guest-sdk/python python3 -m unittest discover -s guest-sdk/python/tests
"""

import json
import linecache
import sys
import unittest

from componentize_py_types import Err
from wit_world.imports import output as wit_output
from wit_world.imports import types

import factbuoy_plugin.output as output
from factbuoy_plugin import _bundle
from factbuoy_plugin import (
    Artifact,
    Capability,
    Description,
    Failed,
    Gatherer,
    InvalidParameters,
    Param,
    Params,
    Unavailable,
    export,
)


class FakeArtifact:
    def __init__(self, store, name, fail_with=None):
        self.store, self.name, self.fail_with = store, name, fail_with
        store[name] = []

    def write(self, chunk):
        if self.fail_with:
            raise Err(self.fail_with)
        self.store[self.name].append(bytes(chunk))

    def finish(self):
        self.store[self.name].append(None)


class OutputTest(unittest.TestCase):
    def setUp(self):
        self.store = {}
        self.fail_with = None
        self.original = wit_output.create
        wit_output.create = lambda name, media_type: FakeArtifact(self.store, name, self.fail_with)

    def tearDown(self):
        wit_output.create = self.original

    def test_json_is_streamed_in_chunks_below_the_per_call_limit_and_finished(self):
        value = {"items": ["x" * 1000] * 200}
        output.write_json("facts.json", value)
        chunks = self.store["facts.json"]
        self.assertIsNone(chunks[-1], "not finished")
        self.assertTrue(all(len(c) <= output.CHUNK_BYTES for c in chunks[:-1]))
        self.assertGreater(len(chunks), 3)
        self.assertEqual(json.loads(b"".join(chunks[:-1])), value)
        self.assertTrue(b"".join(chunks[:-1]).endswith(b"\n"))

    def test_a_host_refusal_becomes_failed_with_its_reason(self):
        self.fail_with = wit_output.OutputError_LimitExceeded("total output above 4 GiB")
        with self.assertRaises(Failed) as caught:
            output.write_text("a.txt", "x")
        self.assertEqual(
            str(caught.exception), "writing output: limit exceeded: total output above 4 GiB"
        )


class DescribeAndParamsTest(unittest.TestCase):
    def test_the_builders_make_the_wit_description(self):
        info = (
            Description("demo", "1.2.3", "A demo.")
            .param(Param.duration("since").required().describe("How far back."))
            .param(Param.string("token").default("").secret())
            .capability(Capability.HOST_INFO, "why")
            .optional_capability(Capability.read("/proc"), "why not")
            .artifact(Artifact.facts("a.json", "an artifact").list_keys("mounts", "mount"))
            .artifact(Artifact.table("rows.jsonl", "rows").row_keys("name"))
            .artifact(Artifact.log("log.jsonl", "entries"))
            .artifact(Artifact.opaque("raw.bin", "application/octet-stream", "b").media_type("x/y"))
            .to_wit()
        )
        facts, rows, log, raw = info.artifacts
        self.assertEqual((facts.name, facts.media_type), ("a.json", "application/json"))
        self.assertEqual(facts.kind, types.ArtifactKind_Facts([types.ListKeys("mounts", ["mount"])]))
        self.assertEqual((rows.media_type, rows.kind), ("application/jsonl", types.ArtifactKind_Table(["name"])))
        self.assertIsInstance(log.kind, types.ArtifactKind_Log)
        self.assertEqual((raw.media_type, raw.kind), ("x/y", types.ArtifactKind_Opaque()))
        with self.assertRaises(TypeError):
            Description("d", "1", "").artifact("a.json")
        self.assertEqual(info.name, "demo")
        since, token = info.parameters
        self.assertEqual((since.type, since.required, since.default), (types.ParamType.DURATION, True, None))
        self.assertEqual((token.default, token.secret), ("", True))
        host, proc = info.capabilities
        self.assertIsInstance(host.capability, types.Capability_HostInfo)
        self.assertEqual((proc.capability, proc.required), (types.Capability_ReadPath("/proc"), False))

    def test_the_deprecated_three_argument_artifact_warns_and_gets_its_media_types_kind(self):
        description = Description("old", "0.1.0", "Written for 0.1.")
        cases = [
            ("a.json", "application/json", types.ArtifactKind_Facts([])),
            ("b.json", "application/vnd.x+json; charset=utf-8", types.ArtifactKind_Facts([])),
            ("c.jsonl", "application/jsonl", types.ArtifactKind_Table([])),
            ("d.ndjson", "application/x-ndjson", types.ArtifactKind_Table([])),
            ("e.txt", "text/plain", types.ArtifactKind_Opaque()),
        ]
        for name, media_type, _ in cases:
            with self.assertWarnsRegex(DeprecationWarning, r"Artifact\.facts\(name, description\)"):
                description.artifact(name, media_type, "an artifact")
        declared = description.to_wit().artifacts
        self.assertEqual(
            [(a.name, a.media_type, a.description, a.kind) for a in declared],
            [(name, media_type, "an artifact", kind) for name, media_type, kind in cases],
        )

    def test_typed_access_names_the_parameter_on_a_mismatch(self):
        params = Params(
            [
                ("name", types.ParamValue_String("web-1")),
                ("count", types.ParamValue_Integer(3)),
                ("since", types.ParamValue_Duration(90_000)),
                ("units", types.ParamValue_StringList(["a", "b"])),
            ]
        )
        self.assertEqual(params.string("name"), "web-1")
        self.assertEqual(params.integer("count"), 3)
        self.assertEqual(params.duration_seconds("since"), 90.0)
        self.assertEqual(params.string_list("units"), ["a", "b"])
        self.assertEqual(params.string_list("absent"), [])
        self.assertIsNone(params.opt_boolean("absent"))
        with self.assertRaisesRegex(InvalidParameters, "`name` is not of type integer"):
            params.integer("name")
        with self.assertRaisesRegex(InvalidParameters, "`verbose` has no value"):
            params.boolean("verbose")


class ExportTest(unittest.TestCase):
    def test_errors_become_the_wit_variants(self):
        class Picky(Gatherer):
            def describe(self):
                return Description("picky", "0.1.0", "Refuses.")

            def gather(self, params):
                raise {"bad": InvalidParameters("no"), "gone": Unavailable("none here")}[
                    params.string("why")
                ]

        plugin = export(Picky)()
        self.assertEqual(plugin.describe().name, "picky")
        for why, expected in [
            ("bad", types.GatherError_InvalidParameters("no")),
            ("gone", types.GatherError_Unavailable("none here")),
        ]:
            with self.assertRaises(Err) as caught:
                plugin.gather([("why", types.ParamValue_String(why))])
            self.assertEqual(caught.exception.value, expected)

    def test_only_a_gatherer_can_be_exported(self):
        with self.assertRaises(TypeError):
            export(object)


class BundleTest(unittest.TestCase):
    def test_a_traceback_names_the_projects_files_shows_kept_lines_and_skips_sdk_frames(self):
        # A module bundled from the first root, its source kept as keep_sources keeps it.
        path = _bundle._ROOTS[0] + "bundled_app.py"
        source = "def boom():\n    raise KeyError('on purpose')\n"
        namespace = {}
        exec(compile(source, path, "exec"), namespace)
        lines = source.splitlines(keepends=True)
        linecache.cache[path] = (len(source), None, lines, path)

        def sdk_frame():
            # As export's gather calls the gatherer: the traceback starts in this frame.
            try:
                namespace["boom"]()
            except KeyError as error:
                return _bundle.format_traceback(error, skip=1)

        try:
            text = sdk_frame()
        finally:
            del linecache.cache[path]
        self.assertIn('File "bundled_app.py", line 2, in boom\n', text)
        self.assertIn("    raise KeyError('on purpose')\n", text)
        self.assertNotIn("sdk_frame", text)
        self.assertNotIn("^", text)
        self.assertTrue(text.endswith("KeyError: 'on purpose'\n"), text)

    def test_a_module_that_was_not_bundled_gets_advice_and_nothing_else_does(self):
        hint = _bundle.not_bundled_hint(ModuleNotFoundError("No module named 'csv.x'", name="csv.x"))
        self.assertIn("import csv at the top of app.py", hint)
        self.assertEqual(_bundle.not_bundled_hint(KeyError("csv")), "")

    def test_imports_are_sealed_only_inside_the_component(self):
        finders = list(sys.meta_path)
        _bundle.seal_imports()
        self.assertEqual(sys.meta_path, finders)


if __name__ == "__main__":
    unittest.main()
