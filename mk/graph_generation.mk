# Ego-small graph generation (RMwGGIS Table 2): RMwGGIS (advanced, s = 50) vs EBM(GWG).
GRAPH_GEN_SEEDS ?= 0
GRAPH_GEN_DIRS = outputs/multirun/$(call exp,graph_generation) outputs/multirun/$(call exp,graph_generation_gwg)

.PHONY: table-graph-generation
table-graph-generation: $(STAMP) ## Ego-small MMD table (degree/clustering/orbit/avg) + generated-graph figures (RMwGGIS Table 2)
	$(RUN) -m experiment=$(call exp,graph_generation) progress=false seed=$(GRAPH_GEN_SEEDS) $(ARGS)
	$(RUN) -m experiment=$(call exp,graph_generation_gwg) progress=false seed=$(GRAPH_GEN_SEEDS) $(ARGS)
	$(MAKE) --no-print-directory _table-graph-generation

_table-graph-generation:
	$(PY) scripts/make_table.py $(GRAPH_GEN_DIRS) --group learner \
	  --metrics degree clustering orbit avg ref_avg gen_nodes gen_edges time_per_iter \
	  --paper scripts/paper_values/graph_generation.yaml \
	  --title "Ego-small graph generation, MMD^2 vs the test graphs ($(SCALE) scale)" \
	  --out $(TABLES)/$(call exp,graph_generation)
	@for d in $(GRAPH_GEN_DIRS); do \
	  f=$$(find $$d -path '*figures/graphs.png' 2>/dev/null | sort | head -n 1); \
	  if [ -n "$$f" ]; then cp "$$f" $(TABLES)/$$(basename $$d)_graphs.png; \
	    echo "figure: $(TABLES)/$$(basename $$d)_graphs.png"; fi; \
	done
