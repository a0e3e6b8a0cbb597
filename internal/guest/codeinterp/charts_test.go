package codeinterp

import (
	"reflect"
	"testing"
)

// TestChartTypes shows one figure of every chart type in a real IPython
// kernel and checks the "chart" the display formatter adds beside the png.
func TestChartTypes(t *testing.T) {
	requireLibs(t)
	ts := newTestServer(t)
	ts.run("import matplotlib.pyplot as plt\nimport datetime")
	tests := []struct {
		name, code string
		want       map[string]any // top-level fields that must match
		first      map[string]any // fields of elements[0]
	}{
		{"line", "plt.plot([1, 2, 3], [4, 5, 6], label='a')\nplt.title('T'); plt.xlabel('time (s)'); plt.ylabel('v [m]')\nplt.show()",
			map[string]any{"type": "line", "title": "T", "x_label": "time (s)", "x_unit": "s", "y_unit": "m", "x_scale": "linear"},
			map[string]any{"label": "a", "points": []any{[]any{1.0, 4.0}, []any{2.0, 5.0}, []any{3.0, 6.0}}}},
		{"scatter log", "plt.scatter([1, 2], [3, 40], label='pts')\nplt.yscale('log')\nplt.show()",
			map[string]any{"type": "scatter", "y_scale": "log"},
			map[string]any{"label": "pts", "points": []any{[]any{1.0, 3.0}, []any{2.0, 40.0}}}},
		{"categorical", "plt.plot(['x', 'y', 'z'], [1, 2, 3])\nplt.show()",
			map[string]any{"type": "line", "x_scale": "categorical", "x_tick_labels": []any{"x", "y", "z"}}, nil},
		{"datetime", "plt.plot([datetime.date(2024, 1, 1), datetime.date(2024, 1, 5)], [1, 2])\nplt.show()",
			map[string]any{"type": "line", "x_scale": "datetime"},
			map[string]any{"points": []any{[]any{"2024-01-01", 1.0}, []any{"2024-01-05", 2.0}}}},
		{"bar", "plt.bar(['a', 'b'], [1, 2], label='g')\nplt.show()",
			map[string]any{"type": "bar"}, map[string]any{"label": "a", "group": "g", "value": 1.0}},
		{"pie", "plt.pie([1, 3], labels=['x', 'y'])\nplt.show()",
			map[string]any{"type": "pie"}, map[string]any{"label": "x", "angle": 90.0, "radius": 1.0}},
		{"box", "plt.boxplot([[1, 2, 3, 4, 5, 20]], labels=['A'], patch_artist=True)\nplt.show()",
			map[string]any{"type": "box_and_whisker"},
			map[string]any{"label": "A", "min": 1.0, "first_quartile": 2.25, "median": 3.5, "third_quartile": 4.75, "max": 5.0, "outliers": []any{20.0}}},
		{"superchart", "fig, (a, b) = plt.subplots(2)\na.plot([1, 2]); b.bar(['p'], [3])\nfig.suptitle('S')\nplt.show()",
			map[string]any{"type": "superchart", "title": "S"}, map[string]any{"type": "line"}},
		{"symlog", "plt.plot([1, 2], [-5, 500])\nplt.yscale('symlog')\nplt.show()", map[string]any{"type": "line", "y_scale": "symlog"}, nil},
		{"asinh", "plt.plot([1, 2], [-5, 500])\nplt.yscale('asinh')\nplt.show()", map[string]any{"type": "line", "y_scale": "asinh"}, nil},
		{"logit", "plt.plot([1, 2], [0.1, 0.9])\nplt.yscale('logit')\nplt.show()", map[string]any{"type": "line", "y_scale": "logit"}, nil},
		{"function", "import numpy as np\nplt.plot([1, 4], [1, 2])\nplt.xscale('function', functions=(np.sqrt, np.square))\nplt.show()",
			map[string]any{"type": "line", "x_scale": "function"}, map[string]any{"points": []any{[]any{1.0, 1.0}, []any{4.0, 2.0}}}},
		{"functionlog", "plt.plot([1, 4], [1, 2])\nplt.xscale('functionlog', functions=(np.sqrt, np.square))\nplt.show()",
			map[string]any{"type": "line", "x_scale": "functionlog"}, nil},
		{"unknown", "plt.plot([1, 2]); plt.bar([1], [2])\nplt.show()",
			map[string]any{"type": "unknown", "elements": []any{}}, nil},
	}
	for _, tc := range tests {
		r := ts.run(tc.code)
		res := r.of("result")
		if e := r.err(); e != nil || len(res) != 1 {
			t.Errorf("%s: error %v, results %v", tc.name, e, r.events)
			continue
		}
		decodePNG(t, res[0].get("png"))
		chart, _ := res[0].get("chart").(map[string]any)
		for k, v := range tc.want {
			if !reflect.DeepEqual(chart[k], v) {
				t.Errorf("%s: chart.%s = %#v, want %#v", tc.name, k, chart[k], v)
			}
		}
		if tc.first == nil {
			continue
		}
		elems, _ := chart["elements"].([]any)
		if len(elems) == 0 {
			t.Errorf("%s: no elements in %v", tc.name, chart)
			continue
		}
		el, _ := elems[0].(map[string]any)
		for k, v := range tc.first {
			if !reflect.DeepEqual(el[k], v) {
				t.Errorf("%s: elements[0].%s = %#v, want %#v", tc.name, k, el[k], v)
			}
		}
	}
}
