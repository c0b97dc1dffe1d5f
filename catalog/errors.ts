// Errors of the model catalog; codes are listed in docs/errors.md ("GPU agent, relay and catalog").
import { FabricError } from '../protocol/errors.js';

export const CatalogErrorCode = {
  ConfigInvalid: 'CATALOG_CONFIG_INVALID',
  ModelUnknown: 'CATALOG_MODEL_UNKNOWN',
  ModelUnreadable: 'CATALOG_MODEL_UNREADABLE',
  ShapeInvalid: 'CATALOG_SHAPE_INVALID',
  FilesMissing: 'CATALOG_MODEL_FILES_MISSING',
  ConfigJsonInvalid: 'CATALOG_MODEL_CONFIG_INVALID',
  TokenizerInvalid: 'CATALOG_TOKENIZER_INVALID',
  KeyInvalid: 'CATALOG_MODEL_KEY_INVALID',
  DtypeUnsupported: 'CATALOG_DTYPE_UNSUPPORTED',
  FileNotRegular: 'CATALOG_MODEL_FILE_NOT_REGULAR',
  FileTooLarge: 'CATALOG_MODEL_FILE_TOO_LARGE',
  ExternalDataOutside: 'CATALOG_EXTERNAL_DATA_OUTSIDE',
} as const;

export function catalogConfigInvalid(message: string, hint: string): FabricError {
  return new FabricError(CatalogErrorCode.ConfigInvalid, 500, message, { hint });
}

export function modelUnknown(key: string, known: readonly string[]): FabricError {
  return new FabricError(
    CatalogErrorCode.ModelUnknown,
    404,
    `model ${JSON.stringify(key)} is not served by this fabric`,
    {
      hint: known.length > 0 ? `use one of: ${known.join(', ')}` : 'configure models with NDIF_MODELS',
      details: { key, models: [...known] },
    },
  );
}

export function modelUnreadable(key: string, dir: string, cause: unknown): FabricError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new FabricError(CatalogErrorCode.ModelUnreadable, 422, `model ${key} in ${dir} cannot be read: ${reason}`, {
    hint: 'check that the folder holds model.onnx (with its external data), config.json and tokenizer.json',
    details: { key, dir },
    cause,
  });
}

export function shapeInvalid(shape: unknown): FabricError {
  return new FabricError(CatalogErrorCode.ShapeInvalid, 400, `manifest shape ${JSON.stringify(shape)} is not valid`, {
    hint: 'give batch and sequence as positive integers (e.g. { batch: 1, sequence: 16 })',
  });
}
