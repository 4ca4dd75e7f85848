"""What charts and lesson text are drawn with. The charts themselves live with their experiments.

* `plots`: plotly building blocks (axes, formatting, the provenance subtitle);
* `plain_figure`: a figure built as plain dicts, without plotly's validation;
* `figure_widget`: labkit's FigureWidget (plotly's front end sent once per kernel);
* `units`: a value written in its axis's unit; the style of log ticks;
* `names`: short labels for cuDNN plans;
* `labels`: where a chart's point labels go, clear of each other, the markers and the lines;
* `prose`: Markdown text and tables.
"""
