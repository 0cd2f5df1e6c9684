# Put tools together and leave a report in out/ for the host to pick up.
text = tools.peer_embedded_text()["content"][0]["text"]
report = fetch(tools.peer_reference()["content"][1])
summary = "# Report\n\n- embedded: " + text + "\n- attachment: " + read_text(report) + "\n"
write_text("out/report.md", summary)
summary.count("\n")
