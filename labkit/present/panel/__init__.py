"""A lesson panel, made of parts.

* `controls`: the state (which values exist, what a move means);
* `view`: the ipywidgets and the FigureWidget;
* `job`: getting a table in the background, stopped by a newer request;
* `gpu_picker`: this GPU or a recording;
* `panel`: wires them together.
"""
