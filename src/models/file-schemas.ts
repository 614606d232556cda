/**
 * The JSON files of a model folder that we read, as TypeBox schemas of the fields we use: the
 * transformers config, the tokenizer config, and sentence-transformers' module list and module
 * configs. Every other field is allowed and left alone (the files carry many). A field with a
 * value of the wrong type stops the read with one error naming the file and the field
 * (facts.ts readModelFile). A JSON null counts as absent, as the Python that writes these files
 * means it (None).
 */
import { Type, type Static } from 'typebox';

const integer = Type.Optional(Type.Integer());
const number = Type.Optional(Type.Number());
const string = Type.Optional(Type.String());
const boolean = Type.Optional(Type.Boolean());
const strings = Type.Optional(Type.Array(Type.String()));

/** A tower's part of an image-text model's config.json. */
function TowerConfig() {
  return Type.Object({
    model_type: string,
    vocab_size: integer,
    hidden_size: integer,
    /** jina-clip's text tower names its width so. */
    embed_dim: integer,
    max_position_embeddings: integer,
    image_size: integer,
    patch_size: integer,
  });
}

/** config.json: the architecture, its sizes, and a classification head's labels. */
export const ModelConfig = Type.Object({
  model_type: string,
  architectures: strings,
  vocab_size: integer,
  hidden_size: integer,
  /** GPT-2's and T5's names for the hidden size. */
  n_embd: integer,
  d_model: integer,
  max_position_embeddings: integer,
  n_positions: integer,
  id2label: Type.Optional(Type.Record(Type.String(), Type.String())),
  num_labels: integer,
  problem_type: string,
  /** sentence-transformers 4+ saves a CrossEncoder's settings here. */
  sentence_transformers: Type.Optional(Type.Object({})),
  /** Image-text models (CLIP, SigLIP, jina-clip): the two towers' configs and the shared width. */
  projection_dim: integer,
  text_config: Type.Optional(TowerConfig()),
  vision_config: Type.Optional(TowerConfig()),
});
export type ModelConfig = Static<typeof ModelConfig>;

/** tokenizer_config.json: the window and (ColBERT's query expansion) the mask token. */
export const TokenizerConfig = Type.Object({
  /** Often a placeholder of 1e30 when the tokenizer sets no limit. */
  model_max_length: number,
  mask_token: Type.Optional(Type.Union([Type.String(), Type.Object({ content: Type.String() })])),
});
export type TokenizerConfig = Static<typeof TokenizerConfig>;

/** modules.json: sentence-transformers' pipeline, one entry per module folder. */
export const StModules = Type.Array(
  Type.Object({
    idx: integer,
    name: string,
    /** The module's folder, relative to the model folder (empty for the transformer itself). */
    path: string,
    /** The module's class: sentence_transformers.models.Pooling, pylate.models.Dense.Dense, .... */
    type: string,
  }),
);
export type StModules = Static<typeof StModules>;

/** sentence_bert_config.json: the window sentence-transformers truncates to. */
export const SentenceBertConfig = Type.Object({ max_seq_length: integer });
export type SentenceBertConfig = Static<typeof SentenceBertConfig>;

/** config_sentence_transformers.json: prompts, the CrossEncoder marker, and PyLate's ColBERT settings. */
export const SentenceTransformersConfig = Type.Object({
  prompts: Type.Optional(Type.Record(Type.String(), Type.String())),
  default_prompt_name: string,
  model_type: string,
  query_prefix: string,
  document_prefix: string,
  query_length: integer,
  document_length: integer,
  attend_to_expansion_tokens: boolean,
  do_query_expansion: boolean,
  skiplist_words: strings,
});
export type SentenceTransformersConfig = Static<typeof SentenceTransformersConfig>;

/**
 * 1_Pooling/config.json (the Pooling module's folder): newer files name the mode, older ones set one
 * flag per mode. A flag named otherwise (a mode of a newer version) is found by its prefix.
 */
export const PoolingConfig = Type.Object({
  pooling_mode: string,
  pooling_mode_cls_token: boolean,
  pooling_mode_mean_tokens: boolean,
  pooling_mode_max_tokens: boolean,
  pooling_mode_mean_sqrt_len_tokens: boolean,
  pooling_mode_weightedmean_tokens: boolean,
  pooling_mode_lasttoken: boolean,
  include_prompt: boolean,
});
export type PoolingConfig = Static<typeof PoolingConfig>;

/** A Dense module's config.json: the projection's width. */
export const DenseConfig = Type.Object({ out_features: integer });
export type DenseConfig = Static<typeof DenseConfig>;

/** SpladePooling's config.json. */
export const SpladePoolingConfig = Type.Object({ pooling_strategy: string, activation_function: string });
export type SpladePoolingConfig = Static<typeof SpladePoolingConfig>;
