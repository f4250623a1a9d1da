//! Rich outputs of a real Python kernel with pandas and matplotlib: a DataFrame comes back as
//! a bounded text and HTML table, a figure as a PNG that decodes to its stated size, figures
//! are closed at the end of the cell, and a large text output is stored for
//! `tool_result_read` while the figures still come back whole.

use base64::Engine;
use serde_json::{Value as Json, json};
use toolvisor_tests::eval::{self, args};

fn png(image: &Json) -> image::DynamicImage {
    assert_eq!(image["mime"], "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .expect("base64");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!(
        (json!(w), json!(h)),
        (image["width"].clone(), image["height"].clone())
    );
    let decoded = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .expect("the PNG decodes");
    assert_eq!((decoded.width(), decoded.height()), (w, h));
    decoded
}

#[test]
fn a_dataframe_comes_back_as_a_bounded_text_and_html_table() {
    let d = eval::daemon("table_rows = 10");
    let v = eval::ok(
        &d,
        "c",
        "import pandas as pd\ndf = pd.DataFrame({'n': range(100), 'sq': [i * i for i in range(100)]})\ndf",
    );
    let result = &v["outputs"][0];
    assert_eq!(result["type"], "result");
    let text = result["data"]["text/plain"].as_str().unwrap();
    assert!(text.contains("[100 rows x 2 columns]"), "{text}");
    assert!(text.contains("99  9801"), "the last row is shown: {text}");
    assert!(text.lines().count() < 20, "rows are bounded: {text}");
    let html = result["data"]["text/html"].as_str().unwrap();
    assert!(
        html.contains("<table") && html.contains("<th>sq</th>"),
        "{html}"
    );
    assert!(
        html.matches("<tr").count() <= 12,
        "html rows are bounded: {html}"
    );
    assert_eq!(v["text"].as_str().unwrap(), format!("{text}\n"));
    // display() of a frame renders the same way, in order with prints.
    let v = eval::ok(
        &d,
        "c",
        "print('top')\ndisplay(df.head(3))\nprint('bottom')",
    );
    assert_eq!(
        v["text"],
        "top\n   n  sq\n0  0   0\n1  1   1\n2  2   4\nbottom\n"
    );
    assert!(
        v["outputs"][0]["data"]["text/html"]
            .as_str()
            .unwrap()
            .contains("<table")
    );
}

#[test]
fn a_matplotlib_figure_comes_back_as_a_png_and_is_closed() {
    let d = eval::daemon("");
    let v = eval::ok(
        &d,
        "c",
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3))\nax.plot([1, 2, 3], [1, 4, 9])\nprint('plotted')",
    );
    let images = v["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{v}");
    let img = png(&images[0]);
    assert!(img.width() > 100 && img.height() > 100);
    assert_eq!(
        v["outputs"][0],
        json!({"type": "image", "image": 0, "at": 8})
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .starts_with("plotted\n[image 1: image/png "),
        "{}",
        v["text"]
    );
    // Every figure was closed at the end of the cell.
    assert_eq!(eval::ok(&d, "c", "plt.get_fignums()")["text"], "[]\n");
    // plt.show() emits the figure where it is called; two figures, two images, in order.
    let v = eval::ok(
        &d,
        "c",
        "plt.plot([3, 2, 1])\nplt.show()\nprint('between')\nplt.figure()\nplt.bar(['a', 'b'], [1, 2])",
    );
    assert_eq!(v["images"].as_array().unwrap().len(), 2, "{}", v["text"]);
    let text = v["text"].as_str().unwrap();
    assert!(text.starts_with("[image 1: image/png"), "{text}");
    assert!(text.contains("between\n"), "{text}");
    for image in v["images"].as_array().unwrap() {
        png(image);
    }
    // display() of a figure object is an image too.
    let v = eval::ok_with(
        &d,
        "c",
        args(
            "f = plt.figure()\nplt.plot([0, 1])\ndisplay(f)\nplt.close(f)",
            json!({}),
        ),
    );
    assert_eq!(v["images"].as_array().unwrap().len(), 1, "{}", v["text"]);
}

#[test]
fn a_large_text_output_is_stored_with_a_ref_and_figures_still_come_back() {
    let d = eval::daemon("");
    let v = eval::ok(
        &d,
        "c",
        "for i in range(3000):\n    print('line', i, 'x' * 30)\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])\n'done'",
    );
    let projected = &v["projected"]["text"];
    let reference = projected["ref"]
        .as_str()
        .expect("the text is stored with a ref");
    assert!(
        projected["total_chars"].as_u64().unwrap() > 100_000,
        "{projected}"
    );
    assert!(v["text"].as_str().unwrap().len() < 60_000);
    let images = v["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "figures are never projected");
    png(&images[0]);
    let total = projected["total_chars"].as_u64().unwrap();
    let page = d.ok(
        "c",
        "tool_result_read",
        json!({"ref": reference, "offset": total - 200, "limit": 200}),
    );
    assert!(
        page["text"].as_str().unwrap().contains("line 2999 "),
        "{page}"
    );
}

#[test]
fn a_figure_comes_with_its_data_for_a_model_without_vision() {
    let d = eval::daemon("");
    let v = eval::ok(
        &d,
        "c",
        "import matplotlib.pyplot as plt\nimport numpy as np\n\
         fig, (a, b) = plt.subplots(1, 2)\nfig.suptitle('Growth')\n\
         a.plot([1, 2, 3], [1, 4, 9], label='squares')\na.plot([1, 2, 3], [1, 8, float('nan')], label='cubes')\n\
         a.set_title('powers'); a.set_xlabel('n'); a.set_ylabel('value'); a.set_yscale('log')\n\
         b.bar(['red', 'blue'], [3, 5], label='votes')\nb.scatter(np.arange(1000), np.arange(1000) * 2.0)\n\
         print('plotted')",
    );
    let chart = &v["images"][0]["chart"];
    assert_eq!(chart["title"], "Growth", "{chart}");
    let left = &chart["axes"][0];
    assert_eq!(left["title"], "powers");
    assert_eq!(left["xlabel"], "n");
    assert_eq!(left["ylabel"], "value");
    assert_eq!(left["yscale"], "log");
    assert_eq!(
        left["series"][0],
        json!({"type": "line", "label": "squares", "points": 3, "x": [1.0, 2.0, 3.0], "y": [1.0, 4.0, 9.0]})
    );
    // NaN is not JSON: it becomes null.
    assert_eq!(left["series"][1]["y"], json!([1.0, 8.0, null]));
    let right = &chart["axes"][1];
    let bar = right["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "bar")
        .unwrap_or_else(|| panic!("no bar series: {right}"));
    assert_eq!(bar["y"], json!([3.0, 5.0]));
    assert_eq!(bar["label"], "votes");
    assert_eq!(right["xticklabels"], json!(["red", "blue"]));
    // A long series is cut, and says how long it was.
    let scatter = right["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["type"] == "scatter")
        .unwrap();
    assert_eq!(scatter["points"], 1000);
    assert_eq!(scatter["x"].as_array().unwrap().len(), 500);
    assert_eq!(scatter["y"][499], 998.0);
    // The text says what the image is, for a reader of the text alone.
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("chart \"Growth\": 2 axes, 4 series (line \"squares\", line \"cubes\"")
            && text.contains("data in images[0].chart]"),
        "{text}"
    );
}
