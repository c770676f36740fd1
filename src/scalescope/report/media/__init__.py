"""The media: any document (report/document.py) drawn as terminal text, an offline HTML page or
JSON; the page's charts; the Chrome trace and the report JSON encoded."""
